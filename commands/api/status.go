package api

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
)

// withAgent adds what the link saw of the machine's agent to its view.
func withAgent(m *master.Master, v *apipb.MachineView) *apipb.MachineView {
	if seen, ok := m.Agent(v.Name); ok {
		if !seen.LastPoll.IsZero() {
			v.LastPollUs = seen.LastPoll.UnixMicro()
		}
		v.MissedPolls = int32(seen.MissedPolls)
		v.ClockSkewUs = seen.ClockSkew.Microseconds()
		v.CgroupMode, v.CgroupNote = seen.CgroupMode, seen.CgroupNote
	}
	return v
}

// storeKind names the store's backend, seeing through decorators that
// offer Unwrap (such as ops.InstrumentStore).
func storeKind(s master.Store) string {
	for {
		u, ok := s.(interface{ Unwrap() events.Store })
		if !ok {
			return fmt.Sprintf("%T", s)
		}
		s = u.Unwrap()
	}
}

// storeStatus adds to a Status reply what needs the store: the head (or why it
// could not be read) and when the current leader was elected.
func (s *Service) storeStatus(ctx context.Context, out *apipb.StatusReply, epoch int64) {
	out.Store = storeKind(s.m.Store())
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	h, err := s.m.Store().Head(ctx)
	if err != nil {
		out.StoreError = err.Error()
		return
	}
	out.Head = h
	if epoch == 0 {
		return
	}
	evs, err := s.m.Store().ReadStream(ctx, events.CellStream)
	if err != nil {
		out.StoreError = err.Error()
		return
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if le, ok := evs[i].Data.(*events.LeaderElected); ok && le.Epoch == epoch && strings.EqualFold(le.Holder, out.LeaderName) {
			out.LeaderSinceUs = evs[i].OccurredAt.UnixMicro()
			return
		}
	}
}
