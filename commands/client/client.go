package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
)

// Header names shared with the master (see commands/master).
const (
	UserHeader   = "x-corral-user"
	LeaderHeader = "x-corral-leader"
)

// Options tune a Client.
type Options struct {
	// Dial are the connections' options (credentials); none: plaintext.
	Dial []grpc.DialOption
	// AttemptTimeout bounds one attempt at one master, so a master that
	// hangs (paused, partitioned) costs a retry elsewhere, not the whole
	// call (default 3 s).
	AttemptTimeout time.Duration
	// MaxAttempts bounds how often a mutation is tried; 0: until ctx ends.
	MaxAttempts int
	// GiveUpWhenDown ends a mutation once every master given has refused
	// the connection twice: no master process runs, and a person waiting
	// had better hear it at once.
	GiveUpWhenDown bool
	// Note, when set, hears about each retry.
	Note func(format string, args ...any)
	// Sleep waits between rounds of retries (tests replace it).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client talks to any of a cell's masters.
type Client struct {
	user  string
	addrs []string // as given, then leaders learned
	o     Options

	mu    sync.Mutex
	cur   string // the master that answered last
	conns map[string]*grpc.ClientConn
}

// New returns a client of the masters at addrs, acting as user.
func New(addrs []string, user string, o Options) (*Client, error) {
	var clean []string
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a != "" {
			clean = append(clean, a)
		}
	}
	if len(clean) == 0 {
		return nil, errors.New("client: no master address given")
	}
	if user == "" {
		return nil, errors.New("client: user: must be set")
	}
	if len(o.Dial) == 0 {
		o.Dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 3 * time.Second
	}
	if o.Note == nil {
		o.Note = func(string, ...any) {}
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	return &Client{user: user, addrs: clean, o: o, cur: clean[0], conns: map[string]*grpc.ClientConn{}}, nil
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

// NewRequestID returns a fresh client request id.
func NewRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "cli-" + hex.EncodeToString(b[:])
}

// Close closes every connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	return nil
}

// Context returns ctx carrying the caller's identity.
func (c *Client) Context(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, UserHeader, c.user)
}

func (c *Client) conn(addr string) (apipb.CellClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.conns[addr]
	if cc == nil {
		var err error
		if cc, err = grpc.NewClient(addr, c.o.Dial...); err != nil {
			return nil, fmt.Errorf("master %s: %w", addr, err)
		}
		c.conns[addr] = cc
	}
	return apipb.NewCellClient(cc), nil
}

// order is the masters to try: the one that answered last, then the rest.
func (c *Client) order() []string {
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

// answered makes addr the first to try next; a leader learned from a
// follower joins the addresses.
func (c *Client) answered(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur = addr
	if !slices.Contains(c.addrs, addr) {
		c.addrs = append(c.addrs, addr)
	}
}

// SetAttemptTimeout changes Options.AttemptTimeout, for a call known to
// take longer (a long query).
func (c *Client) SetAttemptTimeout(d time.Duration) {
	c.mu.Lock()
	c.o.AttemptTimeout = d
	c.mu.Unlock()
}

// AttemptTimeout is Options.AttemptTimeout.
func (c *Client) AttemptTimeout() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.o.AttemptTimeout
}

// Current is the master the next call goes to first.
func (c *Client) Current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

func (c *Client) attemptCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Context(ctx), c.AttemptTimeout())
}

// Read runs a read on the first master that answers: every master serves
// reads.
func (c *Client) Read(ctx context.Context, fn func(ctx context.Context, api apipb.CellClient) error) error {
	var err error
	for _, addr := range c.order() {
		var api apipb.CellClient
		if api, err = c.conn(addr); err != nil {
			return err
		}
		actx, cancel := c.attemptCtx(ctx)
		err = fn(actx, api)
		cancel()
		if status.Code(err) != codes.Unavailable {
			if err == nil {
				c.answered(addr)
			}
			return err
		}
		c.o.Note("master %s: %v", addr, err)
	}
	return err
}

// Mutate sends a mutation under a fresh request id, the same on every
// attempt (Do).
func (c *Client) Mutate(ctx context.Context, fn func(ctx context.Context, api apipb.CellClient, requestID string, opts ...grpc.CallOption) (*apipb.MutationReply, error)) (*apipb.MutationReply, error) {
	id := NewRequestID()
	var reply *apipb.MutationReply
	err := c.Do(ctx, func(ctx context.Context, api apipb.CellClient, opts ...grpc.CallOption) error {
		var err error
		reply, err = fn(ctx, api, id, opts...)
		return err
	})
	return reply, err
}

// Do runs a mutation at the leader: a follower's refusal naming the leader
// is followed at once; other unavailability, and an attempt that hangs, is
// retried at the next master, then after a backoff, until ctx ends or
// Options.MaxAttempts. call must reuse its request id on every attempt, so
// that a write a hung or dead master applied is not applied twice.
func (c *Client) Do(ctx context.Context, call func(ctx context.Context, api apipb.CellClient, opts ...grpc.CallOption) error) error {
	order := c.order()
	addr, next := order[0], 1
	backoff := 100 * time.Millisecond
	hops, down := 0, 0
	var err error
	for attempt := 0; c.o.MaxAttempts == 0 || attempt < c.o.MaxAttempts; attempt++ {
		var api apipb.CellClient
		if api, err = c.conn(addr); err != nil {
			return err
		}
		var trailer metadata.MD
		actx, cancel := c.attemptCtx(ctx)
		err = call(actx, api, grpc.Trailer(&trailer))
		cancel()
		if err == nil {
			c.answered(addr)
			return nil
		}
		code := status.Code(err)
		hung := code == codes.DeadlineExceeded && ctx.Err() == nil
		if code != codes.Unavailable && !hung {
			return err
		}
		if leaders := trailer.Get(LeaderHeader); len(leaders) > 0 && leaders[0] != "" && leaders[0] != addr && hops < 3 {
			c.o.Note("master %s does not lead; following the leader at %s", addr, leaders[0])
			addr = leaders[0]
			order = append([]string{addr}, slices.DeleteFunc(order, func(a string) bool { return a == addr })...)
			next = len(order) // the leader is known: retry it after a pause, not the others
			hops++
			continue
		}
		c.o.Note("master %s: %v; retrying", addr, err)
		if c.o.GiveUpWhenDown && unreachable(err) {
			if down++; down >= 2*len(order) {
				return err
			}
		}
		if next < len(order) {
			addr = order[next]
			next++
			continue
		}
		if serr := c.o.Sleep(ctx, backoff); serr != nil {
			return fmt.Errorf("%w (last error: %v)", serr, err)
		}
		backoff = min(2*backoff, 2*time.Second)
		addr, next, hops = order[0], 1, 0
	}
	return err
}

// unreachable reports whether err says no process listens at the address.
func unreachable(err error) bool {
	msg := status.Convert(err).Message()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "connection error")
}

// Watch opens a Watch stream on the first master that accepts it. The
// stream has no time limit: it ends with ctx.
func (c *Client) Watch(ctx context.Context, req *apipb.EventsRequest) (apipb.Cell_WatchClient, error) {
	return openStream(c, ctx, func(ctx context.Context, api apipb.CellClient) (apipb.Cell_WatchClient, error) {
		return api.Watch(ctx, req)
	})
}

// Logs opens a task's log stream (TaskLogs) on the first master that
// answers, with no attempt timeout: a followed log lasts as long as ctx.
func (c *Client) Logs(ctx context.Context, req *apipb.TaskLogsRequest) (apipb.Cell_TaskLogsClient, error) {
	return openStream(c, ctx, func(ctx context.Context, api apipb.CellClient) (apipb.Cell_TaskLogsClient, error) {
		return api.TaskLogs(ctx, req)
	})
}

// openStream opens a server stream on the first master that answers.
func openStream[S any](c *Client, ctx context.Context, open func(context.Context, apipb.CellClient) (S, error)) (S, error) {
	var zero S
	var err error
	for _, addr := range c.order() {
		var api apipb.CellClient
		if api, err = c.conn(addr); err != nil {
			return zero, err
		}
		var stream S
		if stream, err = open(c.Context(ctx), api); err == nil {
			c.answered(addr)
			return stream, nil
		}
		c.o.Note("master %s: %v", addr, err)
	}
	return zero, err
}
