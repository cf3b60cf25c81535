package writer

import (
	"container/list"
	"sync"

	"github.com/corralhq/corral/events"
)

// Result is where a command's events landed.
type Result struct {
	First, Last int64 // 0, 0 when the command changed nothing
	Events      int
	Duplicate   bool // the request id was seen before: nothing new was appended
	// Appended are the events this request appended, for the caller to
	// say what changed; nil for a duplicate. Recent does not keep them.
	Appended []events.Event
}

// Recent remembers where recent request ids landed so a retry is answered
// without touching the store. It is bounded; older retries are caught by
// the store's idempotency keys. It is safe for concurrent use.
type Recent struct {
	mu    sync.Mutex
	max   int
	order *list.List
	byKey map[string]*list.Element
}

type recentEntry struct {
	key string
	res Result
	fp  string // the request's fingerprint; "" when learned from the log
}

// NewRecent remembers up to max request ids, forgetting the oldest first.
func NewRecent(max int) *Recent {
	return &Recent{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns where the request with this idempotency key landed and the
// fingerprint it was appended with ("" when learned from the log).
func (r *Recent) Get(key string) (res Result, fingerprint string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byKey[key]; ok {
		ent := e.Value.(recentEntry)
		return ent.res, ent.fp, true
	}
	return Result{}, "", false
}

// Learn records the fingerprint of a request learned from the log.
func (r *Recent) Learn(key, fingerprint string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byKey[key]; ok {
		ent := e.Value.(recentEntry)
		ent.fp = fingerprint
		e.Value = ent
	}
}

// Note remembers the requests behind events read from the log: each event
// carries its request's idempotency key, and a request's events are
// contiguous. A retry of a request whose append's answer was lost, or that
// another master appended, then gets its first result rather than being
// decided again against a state that already holds it.
func (r *Recent) Note(evs []events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range evs {
		if e.IdempotencyKey == "" {
			continue
		}
		if el, ok := r.byKey[e.IdempotencyKey]; ok {
			if ent := el.Value.(recentEntry); ent.res.Last == e.Position-1 {
				ent.res.Last, ent.res.Events = e.Position, ent.res.Events+1
				el.Value = ent
			}
			continue
		}
		r.addLocked(recentEntry{e.IdempotencyKey, Result{First: e.Position, Last: e.Position, Events: 1}, ""})
	}
}

// Put remembers where a request landed, unless it is known already.
func (r *Recent) Put(key string, res Result, fingerprint string) {
	res.Appended = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byKey[key]; ok {
		return
	}
	r.addLocked(recentEntry{key, res, fingerprint})
}

func (r *Recent) addLocked(ent recentEntry) {
	r.byKey[ent.key] = r.order.PushBack(ent)
	for r.order.Len() > r.max {
		old := r.order.Remove(r.order.Front()).(recentEntry)
		delete(r.byKey, old.key)
	}
}
