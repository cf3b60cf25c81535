package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/writer"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Config describes one master replica.
type Config struct {
	// Name identifies this replica (e.g. "master1").
	Name string
	// Incarnation identifies this process among the replica's lifetimes:
	// the lease is held by Name#Incarnation, so a replica restarted under
	// the same name while its old process is paused is another holder and
	// leads at a new epoch. Default: random, made by New.
	Incarnation string
	// Advertise is the gRPC address clients and followers reach it at.
	Advertise string
	// Store is the cell's log; the master does not close it.
	Store Store
	// Clock is read for command times, leases and checkpoints. Default time.Now.
	Clock func() time.Time
	// LeaseTTL is how long leadership lasts without renewal (default 6 s);
	// the lease is renewed every LeaseTTL/3.
	LeaseTTL time.Duration
	// Checkpoints says when the leader writes checkpoints.
	Checkpoints projections.CheckpointPolicy
	// Admins have the admin capability (Borg §2.5).
	Admins []string
	// MaxBatch bounds how many commands one group commit carries.
	MaxBatch int
	// Logger, default slog.Default().
	Logger *slog.Logger
	// PriceSheet is the price sheet a new cell starts with (nil: the
	// default, commands.DefaultPriceSheet); the first leader writes it.
	PriceSheet *events.PriceSheetSet
	// OnLeading, when set, runs while this replica leads: it is started
	// with a context that ends when leadership does. The scheduler loop and
	// the agent link hang here.
	OnLeading []func(ctx context.Context, m *Master)
}

// Store is what a replica needs of the cell's store: the log it tails and
// serves reads from, the writer's appends and the request ids it checks, the
// leader lease, and the checkpoints it loads and writes. Every events.Store
// is one; the replica never closes it.
type Store interface {
	events.Log
	events.Appender
	events.Requests
	events.Leases
	events.Checkpoints
}

// Master is one replica: a projection of the log kept current, the leader's
// write path when it holds the lease, and the API's reads.
type Master struct {
	cfg   Config
	store Store
	clock func() time.Time
	log   *slog.Logger

	// mu guards state. The writer holds it from its first Decide until the
	// batch is appended and applied, so readers never see uncommitted
	// events; the tail takes it to apply what others appended.
	mu      sync.RWMutex
	state   *projections.State
	applied *events.Notifier // woken after every apply

	leading atomic.Bool
	lease   atomic.Pointer[events.Lease]
	// heldEpoch is the epoch of this incarnation's latest term as leader, 0
	// if none: an election in the state at a later epoch under our name is
	// another incarnation's.
	heldEpoch atomic.Int64
	agents    agentTable               // what the link saw of each agent (hooks.go)
	lossHold  atomic.Pointer[LossHold] // the link's current loss hold, nil when none (link.go)
	writes    chan *writeOp
	recent    *writer.Recent

	checkpointer *projections.Checkpointer
	started      chan struct{}
	stopping     <-chan struct{} // closed when Run's context ends
}

// recentOnStart is how many of the log's last events a starting replica
// reads to learn their request ids.
const recentOnStart = 10_000

// New loads the cell's state (newest checkpoint, then the tail) and returns
// a master ready to Run.
func New(ctx context.Context, cfg Config) (*Master, error) {
	if cfg.Store == nil {
		return nil, errors.New("master: config.store: must be set")
	}
	if cfg.Name == "" {
		return nil, errors.New("master: config.name: must be set")
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Incarnation == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("master: making an incarnation id: %w", err)
		}
		cfg.Incarnation = hex.EncodeToString(b[:])
	}
	if strings.ContainsAny(cfg.Incarnation, "# \t\n") {
		return nil, fmt.Errorf("master: config.incarnation %q: must not hold '#' or white space", cfg.Incarnation)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 6 * time.Second
	}
	if cfg.Checkpoints == (projections.CheckpointPolicy{}) {
		cfg.Checkpoints = projections.DefaultCheckpointPolicy
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := projections.Load(ctx, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("master: loading the cell's state: %w", err)
	}
	m := &Master{
		cfg:     cfg,
		store:   cfg.Store,
		clock:   cfg.Clock,
		log:     cfg.Logger.With("master", cfg.Name),
		state:   st,
		applied: events.NewNotifier(),
		writes:  make(chan *writeOp, 4096),
		recent:  writer.NewRecent(200_000),
		started: make(chan struct{}),
	}
	m.checkpointer = projections.NewCheckpointer(cfg.Store, cfg.Checkpoints, cfg.Clock, st.Position)
	// A retry of a request appended shortly before this replica started
	// (by a leader that died before answering) gets its first result.
	if err := m.noteRequests(ctx, max(st.Position-recentOnStart, 0), st.Position); err != nil {
		return nil, fmt.Errorf("master: reading the log's recent requests: %w", err)
	}
	m.log.Info("state loaded", "position", st.Position, "machines", len(st.Machines), "jobs", len(st.Jobs))
	return m, nil
}

// Run keeps the projection current and campaigns for the lease until ctx
// ends. When it returns, this replica has released its lease.
func (m *Master) Run(ctx context.Context) error {
	m.stopping = ctx.Done()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- m.tail(ctx) }()
	go func() { defer wg.Done(); errc <- m.campaign(ctx) }()
	close(m.started)
	err := <-errc
	wg.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Name is the replica's name.
func (m *Master) Name() string { return m.cfg.Name }

// Holder is what this process holds the leader lease as: the replica's name
// and its incarnation.
func (m *Master) Holder() string { return m.cfg.Name + "#" + m.cfg.Incarnation }

// Store is the log the master writes.
func (m *Master) Store() Store { return m.store }

// Now is the master's clock: the time commands are stamped with.
func (m *Master) Now() time.Time { return m.clock() }

// Leading reports whether this replica holds the lease now.
func (m *Master) Leading() bool { return m.leading.Load() }

// Epoch is the epoch of the lease this replica holds, 0 if none.
func (m *Master) Epoch() int64 {
	if l := m.lease.Load(); l != nil && m.leading.Load() {
		return l.Epoch
	}
	return 0
}

// View runs fn with the state under the read lock. fn must not keep
// references into the state after it returns.
func (m *Master) View(fn func(s *projections.State)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	fn(m.state)
}

// Position is the last position this replica applied.
func (m *Master) Position() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.state.Position
}

// WaitFor blocks until this replica applied position pos (read-your-writes)
// or ctx ends.
func (m *Master) WaitFor(ctx context.Context, pos int64) error {
	for {
		woken := m.applied.Wait()
		if m.Position() >= pos {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for position %d (applied %d): %w", pos, m.Position(), ctx.Err())
		case <-woken:
		}
	}
}

// tail applies the events other writers appended (and skips those this
// replica applied itself as leader).
func (m *Master) tail(ctx context.Context) error {
	sub := m.store.Subscribe(m.Position())
	for {
		evs, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			m.log.Warn("tailing the log", "err", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			sub = m.store.Subscribe(m.Position())
			continue
		}
		m.mu.Lock()
		err = projections.ApplyAll(m.state, evs)
		pos := m.state.Position
		m.mu.Unlock()
		m.recent.Note(evs)
		m.applied.Notify()
		if err != nil {
			// A gap: the subscription started before a reload moved the
			// state. Start again from where the state is.
			m.log.Warn("resubscribing", "position", pos, "err", err)
			sub = m.store.Subscribe(pos)
		}
	}
}

// campaign takes and keeps the leader lease, and runs the leader's loops
// while it holds it.
func (m *Master) campaign(ctx context.Context) error {
	renew := m.cfg.LeaseTTL / 3
	var (
		leadCtx    context.Context
		stopLeader context.CancelFunc
		leaderDone chan struct{}
	)
	stepDown := func(why string) {
		if stopLeader == nil {
			return
		}
		m.leading.Store(false)
		stopLeader()
		<-leaderDone
		stopLeader = nil
		m.log.Warn("no longer leading", "why", why)
	}
	defer func() {
		wasLeading := stopLeader != nil
		stepDown("shutting down")
		if l := m.lease.Load(); l != nil && wasLeading {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := m.store.ReleaseLease(rctx, *l); err != nil {
				m.log.Warn("releasing the lease", "err", err)
			}
			cancel()
		}
	}()
	for {
		var err error
		if stopLeader == nil {
			var l events.Lease
			l, err = m.store.AcquireLease(ctx, events.LeaderLease, m.Holder(), m.cfg.LeaseTTL)
			if err == nil {
				m.lease.Store(&l)
				leadCtx, stopLeader = leadership(ctx)
				leaderDone = make(chan struct{})
				if err := m.becomeLeader(leadCtx, l); err != nil {
					m.log.Error("taking over as leader", "err", err)
					stopLeader()
					stopLeader = nil
				} else {
					go func() { defer close(leaderDone); m.lead(leadCtx) }()
				}
			} else if !errors.Is(err, events.ErrLeaseHeld) && ctx.Err() == nil {
				m.log.Warn("campaigning", "err", err)
			}
		} else {
			l := *m.lease.Load()
			var nl events.Lease
			nl, err = m.store.RenewLease(ctx, l, m.cfg.LeaseTTL)
			if err == nil {
				m.lease.Store(&nl)
			} else if keep, why := events.KeepLeading(l, err, m.clock()); !keep {
				stepDown(why)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(renew):
		}
	}
}

// becomeLeader catches up with the log and records the election.
func (m *Master) becomeLeader(ctx context.Context, l events.Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Catch up, noting the requests behind the last leader's last events:
	// their clients may be retrying here.
	for {
		evs, err := m.store.Read(ctx, m.state.Position+1, 1000)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			break
		}
		if err := projections.ApplyAll(m.state, evs); err != nil {
			return err
		}
		m.recent.Note(evs)
	}
	evs, err := commands.ElectionEvents(m.state, m.clock(),
		&events.LeaderElected{Holder: m.cfg.Name, Epoch: l.Epoch, Address: m.cfg.Advertise, Incarnation: m.cfg.Incarnation}, m.cfg.PriceSheet)
	if err != nil {
		return fmt.Errorf("the price sheet: %w", err)
	}
	res, err := m.store.Append(ctx, events.AppendRequest{ExpectedPosition: m.state.Position, Epoch: l.Epoch, Events: evs})
	if err != nil {
		return err
	}
	for i := range evs {
		evs[i].Position = res.First + int64(i)
		if err := projections.Apply(m.state, evs[i]); err != nil {
			return err
		}
	}
	m.heldEpoch.Store(l.Epoch)
	m.leading.Store(true)
	m.applied.Notify()
	m.log.Info("leading", "epoch", l.Epoch, "position", res.First)
	return nil
}

// lead runs the writer and the leader's loops until ctx ends.
func (m *Master) lead(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.writer(ctx) }()
	for _, f := range m.cfg.OnLeading {
		wg.Add(1)
		go func(f func(context.Context, *Master)) { defer wg.Done(); f(ctx, m) }(f)
	}
	wg.Wait()
}

// ActorOf is who an authenticated identity acts as, on every surface of
// this master (the API, and its HTTP endpoints that take a token): the
// admin capability is the certificate's or token's role, or the master's
// Admins list.
func (m *Master) ActorOf(id auth.Identity) commands.Actor {
	admin := id.Role == auth.RoleAdmin
	for _, a := range m.cfg.Admins {
		admin = admin || a == id.Name || a == "*"
	}
	return commands.Actor{User: id.Name, Admin: admin}
}

// Do submits a command through the leader's write path and waits for its
// result. It fails with ErrNotLeader on a follower.
func (m *Master) Do(ctx context.Context, cmd commands.Command) (Result, error) {
	if !m.leading.Load() {
		return Result{}, m.notLeader()
	}
	op := &writeOp{cmd: cmd, done: make(chan writeResult, 1)}
	select {
	case m.writes <- op:
	default:
		// Full: the writer is far behind. Say so at once rather than make
		// every caller wait in a queue that only grows.
		return Result{}, &commands.Error{Code: commands.ResourceExhausted,
			Msg: fmt.Sprintf("the master's write queue is full (%d commands waiting); retry after a short backoff", cap(m.writes))}
	}
	select {
	case r := <-op.done:
		return r.res, r.err
	case <-ctx.Done():
		// The command may still be appended: the client retries with the
		// same request id and gets the first result.
		return Result{}, ctx.Err()
	}
}

// ErrNotLeader is returned for writes sent to a follower.
type ErrNotLeader struct {
	Master, Leader, Address string
}

func (e *ErrNotLeader) Error() string {
	if e.Leader == "" {
		return fmt.Sprintf("master %s does not lead and no leader is known yet; retry shortly", e.Master)
	}
	return fmt.Sprintf("master %s does not lead: send writes to the leader %s at %s", e.Master, e.Leader, e.Address)
}

func (m *Master) notLeader() error {
	e := &ErrNotLeader{Master: m.cfg.Name}
	// The refusal must not wait for the state: a replica that cannot read
	// its log holds the write lock until it can (reloadLocked). Without the
	// state it names no leader, and the client tries the others.
	var epoch int64
	if m.mu.TryRLock() {
		e.Leader, e.Address, epoch = m.state.Leader, m.state.LeaderAddress, m.state.LeaderEpoch
		m.mu.RUnlock()
	}
	if e.Leader == m.cfg.Name && epoch <= m.heldEpoch.Load() {
		// Our own old election; no one leads now. A later one under our
		// name is another incarnation's (this replica restarted while this
		// process was paused): that one leads.
		e.Leader, e.Address = "", ""
	}
	return e
}

// leadership returns the context of one term as leader.
func leadership(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}
