package cli

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"

	"github.com/corralhq/corral/commands/apipb"
	cellclient "github.com/corralhq/corral/commands/client"
	"github.com/spf13/cobra"
)

// client is the command's use of the one client of the masters
// (commands/client): reads at the first master that answers, mutations at
// the leader under one request id, a bounded number of attempts, and an
// answer at once when no master runs, for a person is waiting.
type client struct {
	*cellclient.Client
	// user is whom the command names as the caller: $CORRAL_USER, --user
	// or $USER until the master says otherwise (me, mutate).
	user string
	// credentialed: the connection carries a certificate or token, whose
	// name, not user, is the caller.
	credentialed bool
	who          *apipb.WhoAmIReply
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
	c, err := newClient(addrs, user, cellclient.Options{Dial: dial, AttemptTimeout: a.timeout, Note: note})
	if err != nil {
		return nil, err
	}
	c.credentialed = dial != nil
	return c, nil
}

// withClient is a verb's RunE that opens the client of the command's
// master(s) for run, and closes it after.
func (a *app) withClient(run func(cmd *cobra.Command, cl *client, argv []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, argv []string) error {
		cl, err := a.client()
		if err != nil {
			return err
		}
		defer cl.Close()
		return run(cmd, cl, argv)
	}
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

// readValue makes one read, rpc with req, at the first master that answers
// and returns its reply. rpc is a method of apipb.CellClient named as a
// value (apipb.CellClient.Status), so a call site states the request once.
func readValue[Req, Rep any](ctx context.Context, cl *client, rpc func(apipb.CellClient, context.Context, Req, ...grpc.CallOption) (Rep, error), req Req, opts ...grpc.CallOption) (Rep, error) {
	var rep Rep
	err := cl.read(ctx, func(ctx context.Context, c apipb.CellClient) (err error) {
		rep, err = rpc(c, ctx, req, opts...)
		return err
	})
	return rep, err
}

// mutate sends one mutation; the master's reply says whom it acted as (the
// certificate's or token's user, not necessarily $CORRAL_USER), and that
// is who owns what follows: what this command prints and waits for.
func (c *client) mutate(ctx context.Context, fn func(ctx context.Context, cl apipb.CellClient, requestID string, opts ...grpc.CallOption) (*apipb.MutationReply, error)) (*apipb.MutationReply, error) {
	rep, err := c.Mutate(ctx, fn)
	if err == nil && rep.GetActor() != "" {
		c.user = rep.GetActor()
	}
	return rep, err
}

// whoAmI is whom the master takes the caller to be, asked once.
func (c *client) whoAmI(ctx context.Context) (*apipb.WhoAmIReply, error) {
	if c.who != nil {
		return c.who, nil
	}
	who, err := readValue(ctx, c, apipb.CellClient.WhoAmI, &apipb.WhoAmIRequest{})
	if err != nil {
		return nil, err
	}
	c.who, c.user = who, who.GetUser()
	return who, nil
}

// me is the caller's user name, the owner of "my jobs": with credentials
// their name as the master read them, whatever --user or $CORRAL_USER say;
// without, the name the command sends, which the master trusts.
func (c *client) me(ctx context.Context) (string, error) {
	if !c.credentialed {
		return c.user, nil
	}
	who, err := c.whoAmI(ctx)
	if err != nil {
		return "", err
	}
	return who.GetUser(), nil
}

// cell is the cell's name as its master says (the zone of its DNS names);
// $CORRAL_CELL, else the default, when the master does not answer.
func (a *app) cellOf(ctx context.Context, c *client) string {
	st, _ := readValue(ctx, c, apipb.CellClient.Status, &apipb.StatusRequest{})
	if name := st.GetCell(); name != "" {
		return name
	}
	return a.cellName()
}

func (c *client) watch(ctx context.Context, req *apipb.EventsRequest) (apipb.Cell_WatchClient, error) {
	return c.Watch(ctx, req)
}
