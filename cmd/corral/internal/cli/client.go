package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
)

// client talks to a cell's masters: reads go to the first that answers,
// mutations to the leader, followed when a follower names it.
type client struct {
	user    string
	timeout time.Duration
	addrs   []string // as given, in order
	note    func(format string, args ...any)
	// dial are the connections' options (credentials); none: plaintext.
	dial []grpc.DialOption

	mu    sync.Mutex
	cur   string // the master that answered last
	conns map[string]*grpc.ClientConn
	// sleep waits between retries; tests replace it.
	sleep func(context.Context, time.Duration) error
}

func newClient(addrs []string, user string, timeout time.Duration, note func(string, ...any)) *client {
	if note == nil {
		note = func(string, ...any) {}
	}
	return &client{user: user, timeout: timeout, addrs: addrs, cur: addrs[0], note: note, conns: map[string]*grpc.ClientConn{}, sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

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
	c := newClient(addrs, user, a.timeout, note)
	c.dial = dial
	return c, nil
}

func (c *client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		cc.Close()
	}
}

func (c *client) conn(addr string) (apipb.CellClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.conns[addr]
	if cc == nil {
		var err error
		opts := c.dial
		if len(opts) == 0 {
			opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		}
		cc, err = grpc.NewClient(addr, opts...)
		if err != nil {
			return nil, fmt.Errorf("--master %s: %w", addr, err)
		}
		c.conns[addr] = cc
	}
	return apipb.NewCellClient(cc), nil
}

// ctx adds the caller's identity and the request's time limit.
func (c *client) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	ctx := metadata.AppendToOutgoingContext(parent, master.UserHeader, c.user)
	if c.timeout > 0 {
		return context.WithTimeout(ctx, c.timeout)
	}
	return context.WithCancel(ctx)
}

// order is the masters to try: the one that answered last, then the rest.
func (c *client) order() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []string{c.cur}
	for _, a := range c.addrs {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

func (c *client) answered(addr string) {
	c.mu.Lock()
	c.cur = addr
	c.mu.Unlock()
}

// read runs a read on the first master that answers.
func (c *client) read(ctx context.Context, fn func(ctx context.Context, cl apipb.CellClient) error) error {
	var err error
	for _, addr := range c.order() {
		var cl apipb.CellClient
		if cl, err = c.conn(addr); err != nil {
			return err
		}
		rctx, cancel := c.ctx(ctx)
		err = fn(rctx, cl)
		cancel()
		if status.Code(err) != codes.Unavailable {
			if err == nil {
				c.answered(addr)
			}
			return err
		}
		c.note("master %s: %v", addr, err)
	}
	return err
}

// newRequestID returns a random client request id.
func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

// mutationRetries bounds how often a mutation is retried while no master
// takes it (an election in progress, a master restarting).
const mutationRetries = 8

// mutate sends a mutation to the leader with one request id, however often
// it is retried: a follower's refusal naming the leader is followed at once;
// other unavailability is retried with backoff, across the masters given.
func (c *client) mutate(ctx context.Context, fn func(ctx context.Context, cl apipb.CellClient, requestID string, opts ...grpc.CallOption) (*apipb.MutationReply, error)) (*apipb.MutationReply, error) {
	id := newRequestID()
	order := c.order()
	addr := order[0]
	next := 1
	backoff := 200 * time.Millisecond
	hops, down := 0, 0
	var err error
	for attempt := 0; attempt < mutationRetries; attempt++ {
		var cl apipb.CellClient
		if cl, err = c.conn(addr); err != nil {
			return nil, err
		}
		var trailer metadata.MD
		rctx, cancel := c.ctx(ctx)
		var reply *apipb.MutationReply
		reply, err = fn(rctx, cl, id, grpc.Trailer(&trailer))
		cancel()
		if err == nil {
			c.answered(addr)
			return reply, nil
		}
		code := status.Code(err)
		if code != codes.Unavailable && !(code == codes.DeadlineExceeded && attempt == 0) {
			return nil, err
		}
		if leaders := trailer.Get(master.LeaderHeader); len(leaders) > 0 && leaders[0] != "" && leaders[0] != addr && hops < 3 {
			c.note("master %s does not lead; following the leader at %s (request %s)", addr, leaders[0], id)
			addr = leaders[0]
			order = append([]string{addr}, slices.DeleteFunc(order, func(a string) bool { return a == addr })...)
			next = len(order) // the leader is known: retry it after a pause, not the others
			hops++
			continue
		}
		c.note("master %s: %v; retrying request %s", addr, err, id)
		if unreachable(err) {
			// No master process answers: give up soon rather than keep a
			// person waiting on a cell that is not running.
			if down++; down >= 2*len(order) {
				return nil, err
			}
		}
		if next < len(order) {
			addr = order[next]
			next++
			continue
		}
		if err := c.sleep(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, 2*time.Second)
		addr, next = order[0], 1
	}
	return nil, err
}

// unreachable reports whether err says no process listens at the address.
func unreachable(err error) bool {
	msg := status.Convert(err).Message()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "connection error")
}

// watch opens a Watch stream on the first master that accepts it. The
// stream has no time limit: it ends with ctx.
func (c *client) watch(ctx context.Context, req *apipb.EventsRequest) (apipb.Cell_WatchClient, error) {
	var err error
	for _, addr := range c.order() {
		var cl apipb.CellClient
		if cl, err = c.conn(addr); err != nil {
			return nil, err
		}
		var stream apipb.Cell_WatchClient
		stream, err = cl.Watch(metadata.AppendToOutgoingContext(ctx, master.UserHeader, c.user), req)
		if err == nil {
			c.answered(addr)
			return stream, nil
		}
		c.note("master %s: %v", addr, err)
	}
	return nil, err
}
