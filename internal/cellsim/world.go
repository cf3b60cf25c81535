package cellsim

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// The world is a discrete-event simulation: one queue of timed actions,
// popped in (time, sequence) order, each run to completion before the next.
// Nothing runs concurrently and nothing reads the real clock, so one seed
// gives one history.

// node is one process of the simulated cell: a master, an agent, a client,
// or the database. A crash bumps its incarnation, which drops every timer
// and message addressed to the old one; a pause holds them until it ends.
type node struct {
	name        string
	inc         int
	down        bool
	pausedUntil time.Time
}

type action struct {
	at  time.Time
	seq uint64
	n   *node // nil: runs whatever happened to any node
	inc int
	fn  func()
}

type queue []*action

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*action)) }
func (q *queue) Pop() any {
	old := *q
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return a
}

// at runs fn after d on node n's current incarnation (n may be nil).
func (w *World) at(n *node, d time.Duration, fn func()) {
	a := &action{at: w.now.Add(d), n: n, fn: fn}
	if n != nil {
		a.inc = n.inc
	}
	w.push(a)
}

func (w *World) push(a *action) {
	w.seq++
	a.seq = w.seq
	heap.Push(&w.q, a)
}

// next pops and runs one action; false when the queue is empty.
func (w *World) next() bool {
	for w.q.Len() > 0 {
		a := heap.Pop(&w.q).(*action)
		w.now = a.at
		if n := a.n; n != nil {
			if n.inc != a.inc || n.down {
				continue // for an incarnation that crashed
			}
			if n.pausedUntil.After(w.now) {
				// Held until the pause ends, in the order it was due.
				a.at = n.pausedUntil
				w.push(a)
				continue
			}
		}
		w.Steps++
		a.fn()
		return true
	}
	return false
}

// ---- the network ----------------------------------------------------------

// errTimeout is what a call gets when no answer came in time: the request
// or the answer was lost, delayed, or the peer is down, paused or cut off.
var errTimeout = errors.New("sim: no answer in time")

type link [2]string

func linkOf(a, b string) link {
	if a > b {
		a, b = b, a
	}
	return link{a, b}
}

// cut reports whether a partition separates a and b now.
func (w *World) cut(a, b string) bool { return w.cuts[linkOf(a, b)] > 0 }

// delay draws a message's transit time: mostly a millisecond or two, now
// and then a long stall (a congested link, a slow peer).
func (w *World) delay() time.Duration {
	if w.rng.Float64() < w.faults.SlowMessages {
		return time.Duration(100+w.rng.IntN(2900)) * time.Millisecond
	}
	return time.Duration(200+w.rng.IntN(3000)) * time.Microsecond
}

// send delivers fn to node `to` after a transit delay, unless the message
// is lost, a partition separates the two at delivery, or the incarnation it
// was sent to is gone.
func (w *World) send(from, to *node, fn func()) {
	w.Messages++
	if w.rng.Float64() < w.faults.Loss {
		w.Lost++
		return
	}
	w.at(to, w.delay(), func() {
		if w.cut(from.name, to.name) {
			w.Lost++
			return
		}
		fn()
	})
}

// call is a request from one node to another and its answer. serve runs on
// `to` when the request arrives and answers through respond, at once or
// later (a master answers a write once it is appended); reply runs on
// `from` with the answer, or with errTimeout when nothing came back within
// timeout. At most one reply runs (none if `from` crashed meanwhile).
func (w *World) call(from, to *node, timeout time.Duration, serve func(respond func(any, error)), reply func(any, error)) {
	done := false
	w.send(from, to, func() {
		answered := false
		serve(func(v any, err error) {
			if answered {
				return
			}
			answered = true
			w.send(to, from, func() {
				if !done {
					done = true
					reply(v, err)
				}
			})
		})
	})
	w.at(from, timeout, func() {
		if !done {
			done = true
			reply(nil, errTimeout)
		}
	})
}

// store runs fn against the database for node n (a master, through its own
// connection): a call to the database's node, which never crashes; while
// the database is down every call fails with memstore.ErrStoreDown.
func (w *World) store(n *node, timeout time.Duration, fn func() (any, error), reply func(any, error)) {
	w.call(n, w.db, timeout, func(respond func(any, error)) { respond(fn()) }, reply)
}

// ---- randomness -----------------------------------------------------------

func (w *World) chance(p float64) bool { return w.rng.Float64() < p }

// between draws a duration uniformly in [lo, hi).
func (w *World) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

// exp draws an exponentially distributed duration of the given mean: the
// time to the next of a kind of fault that strikes at random.
func (w *World) exp(mean time.Duration) time.Duration {
	return time.Duration(w.rng.ExpFloat64() * float64(mean))
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x636f7272616c2d73)) }

func (w *World) tracef(format string, args ...any) {
	if w.cfg.Trace != nil {
		w.cfg.Trace(fmt.Sprintf("%s %s", w.now.Sub(epoch0).Round(time.Microsecond), fmt.Sprintf(format, args...)))
	}
}
