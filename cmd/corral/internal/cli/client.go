package cli

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"

	"github.com/corralhq/corral/commands/apipb"
	cellclient "github.com/corralhq/corral/commands/client"
)

// client is the command's use of the one client of the masters
// (commands/client): reads at the first master that answers, mutations at
// the leader under one request id, a bounded number of attempts, and an
// answer at once when no master runs, for a person is waiting.
type client struct {
	*cellclient.Client
	user string
}

// mutationAttempts bounds how often a mutation is tried while no master
// takes it (an election in progress, a master restarting).
const mutationAttempts = 8

// client returns the client of the command's master(s).
func (a *app) client() (*client, error) {
	var addrs []string
	for _, s := range strings.Split(a.masterAddr(), ",") {
		if s = strings.TrimSpace(s); s != "" {
			addrs = append(addrs, s)
		}
	}
	if len(addrs) == 0 {
		return nil, usageErr("--master: give a host:port")
	}
	user := a.caller()
	if user == "" {
		return nil, fmt.Errorf("no user: set CORRAL_USER (or USER) to the name you act as")
	}
	var note func(string, ...any)
	if a.verbose {
		note = a.note
	}
	dial, err := a.dialOptions(user, "")
	if err != nil {
		return nil, err
	}
	return newClient(addrs, user, cellclient.Options{Dial: dial, AttemptTimeout: a.timeout, Note: note})
}

// newClient fills in the command's retry policy.
func newClient(addrs []string, user string, o cellclient.Options) (*client, error) {
	o.MaxAttempts, o.GiveUpWhenDown = mutationAttempts, true
	c, err := cellclient.New(addrs, user, o)
	if err != nil {
		return nil, err
	}
	return &client{Client: c, user: user}, nil
}

func (c *client) read(ctx context.Context, fn func(ctx context.Context, cl apipb.CellClient) error) error {
	return c.Read(ctx, fn)
}

func (c *client) mutate(ctx context.Context, fn func(ctx context.Context, cl apipb.CellClient, requestID string, opts ...grpc.CallOption) (*apipb.MutationReply, error)) (*apipb.MutationReply, error) {
	return c.Mutate(ctx, fn)
}

func (c *client) watch(ctx context.Context, req *apipb.EventsRequest) (apipb.Cell_WatchClient, error) {
	return c.Watch(ctx, req)
}
