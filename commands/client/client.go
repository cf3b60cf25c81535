// Package client is a client of the cell's masters that follows the leader:
// a write refused by a follower (Unavailable with the leader's address) or
// lost with a dead master is retried at the leader with the same request id,
// so it is applied exactly once.
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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

// Client talks to any of a cell's masters.
type Client struct {
	user  string
	addrs []string
	opts  []grpc.DialOption

	// AttemptTimeout bounds one attempt at one master, so a master that
	// hangs (paused, partitioned) costs a retry elsewhere, not the whole
	// call. Retries reuse the request id, so a write applied by the hung
	// master is not applied twice. Default 3 s.
	AttemptTimeout time.Duration

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn
	current string
}

// New returns a client of the masters at addrs, acting as user.
func New(addrs []string, user string, opts ...grpc.DialOption) (*Client, error) {
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
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return &Client{user: user, addrs: clean, opts: opts, conns: map[string]*grpc.ClientConn{}, current: clean[0], AttemptTimeout: 3 * time.Second}, nil
}

// NewRequestID returns a fresh client request id.
func NewRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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

func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, c.opts...)
	if err != nil {
		return nil, fmt.Errorf("client: master %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

// Current is the master the next call goes to.
func (c *Client) Current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

func (c *Client) use(addr string) {
	c.mu.Lock()
	c.current = addr
	known := false
	for _, a := range c.addrs {
		known = known || a == addr
	}
	if !known {
		c.addrs = append(c.addrs, addr)
	}
	c.mu.Unlock()
}

func (c *Client) next(after string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range c.addrs {
		if a == after {
			c.current = c.addrs[(i+1)%len(c.addrs)]
			return c.current
		}
	}
	c.current = c.addrs[0]
	return c.current
}

// Cell returns the API of the current master, for reads.
func (c *Client) Cell() (apipb.CellClient, error) {
	cc, err := c.conn(c.Current())
	if err != nil {
		return nil, err
	}
	return apipb.NewCellClient(cc), nil
}

// Do runs call against the current master and, while it fails with
// Unavailable, follows the leader it names or tries the next master, until
// ctx ends. call must reuse its request id across attempts.
func (c *Client) Do(ctx context.Context, call func(ctx context.Context, api apipb.CellClient, opts ...grpc.CallOption) error) error {
	backoff := 20 * time.Millisecond
	for {
		addr := c.Current()
		cc, err := c.conn(addr)
		if err != nil {
			return err
		}
		var trailer metadata.MD
		actx, cancel := context.WithTimeout(c.Context(ctx), c.AttemptTimeout)
		err = call(actx, apipb.NewCellClient(cc), grpc.Trailer(&trailer))
		cancel()
		hung := status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil
		if status.Code(err) != codes.Unavailable && !hung {
			return err
		}
		if leader := trailer.Get(LeaderHeader); len(leader) > 0 && leader[0] != "" && leader[0] != addr {
			c.use(leader[0])
			continue
		}
		c.next(addr)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}
