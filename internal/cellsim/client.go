package cellsim

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Client is a user of the cell with commands/client's policy: one
// request at a time, each with its own request id, sent to the master it
// believes leads; a refusal naming the leader is followed, and anything
// else that is not an answer (a timeout, a store error, a deposed leader) is
// retried at the next master with the same id, so a request is applied at
// most once whatever happened to its earlier attempts.
type Client struct {
	w      *World
	node   *node
	user   string
	admin  bool
	seq    int
	leader int
	specs  map[string]*events.JobSpec // what this client submitted, by job name
	// updating is the job of the client's last update, which it may commit
	// or roll back next.
	updating string
	// last are the requests the client still sends once the cell heals.
	last []commands.Command
}

const (
	attemptTimeout = 3 * time.Second // commands/client's AttemptTimeout
	giveUpAfter    = 2 * time.Minute
	jobNames       = 10
)

func (w *World) newClient(i int) *Client {
	return &Client{w: w, node: &node{name: fmt.Sprintf("client%d", i)}, user: fmt.Sprintf("u%d", i), admin: i == 0,
		leader: i % len(w.masters), specs: map[string]*events.JobSpec{}}
}

func (c *Client) start() {
	c.w.at(c.node, c.w.between(0, time.Second), c.next)
}

// next issues the client's next request once its think time has passed.
func (c *Client) next() {
	var cmd commands.Command
	switch {
	case c.w.healing && len(c.last) > 0:
		cmd, c.last = c.last[0], c.last[1:]
	case c.w.healing:
		return
	default:
		cmd = c.command()
	}
	c.seq++
	id := fmt.Sprintf("%s-%d", c.node.name, c.seq)
	cmd = withRequestID(cmd, id)
	c.attempt(id, cmd, c.w.now, 1)
}

// endUpdates queues, as the admin's last requests, the end of every update
// open in s, one way or the other: the cell then settles with no update
// open, so the rolls carried to the end are those no update steps (a
// commit or a rollback in the middle of a roll must still finish it).
func (c *Client) endUpdates(s *projections.State) {
	for _, j := range s.SortedJobs() {
		if j.Dead() || j.Update == nil {
			continue
		}
		meta := c.meta("")
		if c.w.rng.IntN(2) == 0 {
			c.last = append(c.last, commands.CommitUpdate{Meta: meta, User: j.User, Job: j.Name})
		} else {
			c.last = append(c.last, commands.RollbackUpdate{Meta: meta, User: j.User, Job: j.Name})
		}
	}
	if len(c.last) > 0 {
		c.w.at(c.node, c.think(), c.next)
	}
}

// withRequestID gives a queued command its request id.
func withRequestID(cmd commands.Command, id string) commands.Command {
	switch c := cmd.(type) {
	case commands.CommitUpdate:
		c.RequestID = id
		return c
	case commands.RollbackUpdate:
		c.RequestID = id
		return c
	case commands.PromoteUpdate:
		c.RequestID = id
		return c
	}
	return cmd
}

func (c *Client) attempt(id string, cmd commands.Command, started time.Time, n int) {
	if c.w.now.Sub(started) > giveUpAfter {
		c.w.GaveUp++
		c.w.at(c.node, c.think(), c.next)
		return
	}
	m := c.w.masters[c.leader]
	c.w.Requests++
	c.w.call(c.node, m.node, attemptTimeout, func(respond func(any, error)) {
		m.do(cmd, func(res master.Result, err error) { respond(res, err) })
	}, func(v any, err error) {
		c.w.tracef("%s: %s (%T) attempt %d at %s: %v %v", c.node.name, id, cmd, n, m.name, v, err)
		var nl *master.ErrNotLeader
		var refusal *commands.Error
		switch {
		case err == nil:
			c.w.acknowledged(cmd.Metadata().Key(), v.(master.Result))
			if s, ok := cmd.(commands.SubmitJob); ok {
				c.specs[s.Spec.Name] = s.Spec
			}
			c.w.at(c.node, c.think(), c.next)
		case errors.As(err, &refusal):
			c.w.refusedAnswer(cmd.Metadata().Key(), err)
			c.w.at(c.node, c.think(), c.next)
		case errors.As(err, &nl) && nl.Leader != "":
			if i := c.w.masterIndex(nl.Leader); i >= 0 && i != c.leader {
				c.leader = i
				c.attempt(id, cmd, started, n+1)
				return
			}
			c.retryElsewhere(id, cmd, started, n)
		default:
			c.retryElsewhere(id, cmd, started, n)
		}
	})
}

func (c *Client) retryElsewhere(id string, cmd commands.Command, started time.Time, n int) {
	c.leader = (c.leader + 1) % len(c.w.masters)
	c.w.at(c.node, c.w.between(50*time.Millisecond, 300*time.Millisecond), func() { c.attempt(id, cmd, started, n+1) })
}

func (c *Client) think() time.Duration {
	return c.w.between(100*time.Millisecond, 1500*time.Millisecond)
}

func (c *Client) meta(id string) commands.Meta {
	return commands.Meta{Actor: commands.Actor{User: c.user, Admin: c.admin}, RequestID: id}
}

// command draws the client's next request; its id is filled in by next.
func (c *Client) command() commands.Command {
	w := c.w
	id := fmt.Sprintf("%s-%d", c.node.name, c.seq+1)
	meta := c.meta(id)
	name := fmt.Sprintf("j%d", w.rng.IntN(jobNames))
	if c.updating != "" && w.rng.IntN(3) == 0 {
		return c.endUpdate(meta)
	}
	switch r := w.rng.IntN(100); {
	case r < 50:
		return commands.SubmitJob{Meta: meta, Spec: c.spec(name)}
	case r < 62:
		return commands.KillJob{Meta: meta, Name: name, Reason: "done with it"}
	case r < 72:
		return commands.KillTask{Meta: meta, Job: name, Index: int32(w.rng.IntN(4)), Reason: "bad task"}
	case r < 84:
		return c.updateJob(meta, name)
	case r < 90 && c.admin:
		return c.operate(meta)
	case r < 90:
		// Not an admin: refused for want of the capability.
		m := w.agentList[w.rng.IntN(len(w.agentList))].name
		return commands.DrainMachine{Meta: meta, Machine: m, Draining: true, Reason: "mine now"}
	case r < 94:
		// An alloc set: reserved room that the client's jobs may run in.
		return commands.CreateAllocSet{Meta: meta, Name: "pool", Count: int32(1 + w.rng.IntN(3)), Priority: []int32{0, 4, 9}[w.rng.IntN(3)],
			Resources: projections.Resources{CPUMilli: 2000, MemoryBytes: 4 << 30}}
	case r < 96:
		return commands.RemoveAllocSet{Meta: meta, Name: "pool"}

	default:
		return commands.KillJob{Meta: meta, Selector: "tier=canary", Reason: "canaries done"}
	}
}

// endUpdate draws the end of the client's last rolling update, one way or
// the other (refused if it has ended already).
func (c *Client) endUpdate(meta commands.Meta) commands.Command {
	job := c.updating
	c.updating = ""
	switch c.w.rng.IntN(3) {
	case 0:
		return commands.CommitUpdate{Meta: meta, Job: job}
	case 1:
		// Its canaries serve (or not: refused if it has none, or
		// ended). A canary waits for the job's disruption budget,
		// which its other tasks not serving may hold: the client
		// keeps the update to end it (or promote it again) later.
		c.updating = job
		return commands.PromoteUpdate{Meta: meta, Job: job}
	}
	return commands.RollbackUpdate{Meta: meta, Job: job}
}

// updateJob draws a change to job name's spec: a new binary, a scale or a
// priority; a job the client has not submitted is submitted.
func (c *Client) updateJob(meta commands.Meta, name string) commands.Command {
	w := c.w
	old := c.specs[name]
	if old == nil {
		return commands.SubmitJob{Meta: meta, Spec: c.spec(name)}
	}
	sp := proto.Clone(old).(*events.JobSpec)
	switch w.rng.IntN(3) {
	case 0: // a new binary: rolls
		sp.Args = []string{fmt.Sprintf("--v=%d", c.seq)}
		sp.Update = proto.Clone(sp.GetUpdate()).(*events.UpdatePolicy)
		if sp.Update == nil {
			sp.Update = &events.UpdatePolicy{}
		}
		switch w.rng.IntN(4) {
		case 0: // a bad one: it crashes, or fails its health check
			sp.Env = maps.Clone(sp.Env)
			if sp.HealthCheck != nil {
				sp.Env["SIM_HEALTH"] = "bad"
			} else {
				sp.Env["SIM_RUN"] = "crash"
			}
		case 1: // a canary first, kept for a promote
			sp.Update.Canary = 1
		}
	case 1: // scale
		sp.TaskCount = int32(1 + w.rng.IntN(4))
	default: // priority within the band: in place
		lo, hi := projections.BandOf(sp.Priority).Range()
		sp.Priority = lo + int32(w.rng.IntN(int(hi-lo+1)))
	}
	c.updating = name
	return commands.UpdateJob{Meta: meta, Spec: sp}
}

// operate draws an admin's request on machines, quotas, prices or bills.
func (c *Client) operate(meta commands.Meta) commands.Command {
	w := c.w
	m := w.agentList[w.rng.IntN(len(w.agentList))].name
	switch w.rng.IntN(10) {
	case 0:
		// Retired for good: its agent's tasks become orphans.
		return commands.RemoveMachine{Meta: meta, Machine: m, Reason: "retired"}
	case 1, 2:
		// A user's batch quota moves; their running jobs keep what
		// they were admitted with.
		u := w.clients[w.rng.IntN(len(w.clients))].user
		return commands.SetQuota{Meta: meta, User: u, Band: "batch", Resources: projections.Resources{
			CPUMilli: int64(4000 + w.rng.IntN(16000)), MemoryBytes: int64(8+w.rng.IntN(56)) << 30, DiskBytes: 100 << 30, Ports: 100}}
	case 3:
		// New prices from a minute on; the bills price each window by
		// the sheet in force when it started.
		sheet := commands.DefaultPriceSheet()
		sheet.EffectiveUs = w.now.Add(time.Minute).UnixMicro()
		sheet.Bands["batch"].CpuCoreHour = fmt.Sprintf("0.0%d", 10+w.rng.IntN(40))
		return commands.SetPriceSheet{Meta: meta, Sheet: sheet}
	case 4:
		// The month before the cell began: once, then AlreadyExists.
		return commands.CloseBillingPeriod{Meta: meta, Start: epoch0.AddDate(0, -1, 0)}
	}
	return commands.DrainMachine{Meta: meta, Machine: m, Draining: w.rng.IntN(3) == 0, Reason: "maintenance"}
}

// spec draws a job: mostly small services and batch jobs across the bands.
func (c *Client) spec(name string) *events.JobSpec {
	w := c.w
	prio := []int32{0, 1, 2, 4, 6, 8, 9, 10, 11}[w.rng.IntN(9)]
	run, mode := "service", []string{"always", "on-failure"}[w.rng.IntN(2)]
	if w.rng.IntN(3) == 0 {
		run, mode = "batch", []string{"on-failure", "never"}[w.rng.IntN(2)]
	}
	sp := &events.JobSpec{
		Name:      name,
		Priority:  prio,
		TaskCount: int32(1 + w.rng.IntN(4)),
		Command:   "/bin/app",
		Args:      []string{"--v=0"},
		Env:       map[string]string{"SIM_RUN": run},
		Labels:    map[string]string{"tier": []string{"canary", "prod"}[w.rng.IntN(2)]},
		Resources: &events.Resources{CpuMilli: int64(200 + w.rng.IntN(2800)), MemoryBytes: int64(1+w.rng.IntN(16)) << 28},
		Update:    &events.UpdatePolicy{MaxDisruptions: int32(w.rng.IntN(3))},
		Restart:   &events.RestartPolicy{Mode: mode, MaxRestarts: int32(w.rng.IntN(4)), BackoffInitialMs: int64(100 + w.rng.IntN(900)), BackoffMaxMs: 5000},
	}
	if run == "service" && w.rng.IntN(2) == 0 {
		// It serves on a port, checked over HTTP; rolls wait for it.
		sp.PortNames = []string{"http"}
		sp.Resources.Ports = 1
		sp.HealthCheck = &events.HealthCheck{Path: "/healthz", PortName: "http", PeriodMs: int64(500 + w.rng.IntN(2000)), FailuresAllowed: int32(w.rng.IntN(3))}
	}
	if w.rng.IntN(3) == 0 {
		sp.Update.MinHealthyTimeMs = int64(1000 + w.rng.IntN(10000))
		sp.Update.ProgressDeadlineMs = int64(20000 + w.rng.IntN(100000))
	}
	if w.rng.IntN(6) == 0 {
		sp.Constraints = []*events.Constraint{{Attribute: "rack", Op: "=", Values: []string{"r0"}, Soft: w.rng.IntN(2) == 0}}
	}
	if w.rng.IntN(8) == 0 {
		sp.AllocSet = "pool"
		sp.Resources = &events.Resources{CpuMilli: int64(100 + w.rng.IntN(400)), MemoryBytes: 1 << 28}
	}
	return sp
}
