package master

import (
	"context"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// recordRefusalsLocked appends a batch's refusals once the batch is in the
// log (m.mu held, as leader). A failure is logged, not returned: the
// refused callers have their answers already.
func (m *Master) recordRefusalsLocked(ctx context.Context, evs []events.Event) {
	epoch := m.Epoch()
	if len(evs) == 0 || epoch == 0 {
		return
	}
	res, err := m.store.Append(ctx, events.AppendRequest{ExpectedPosition: m.state.Position, Epoch: epoch, Events: evs})
	if err != nil {
		m.log.Warn("recording refused commands", "count", len(evs), "err", err)
		return
	}
	for i := range evs {
		evs[i].Position = res.First + int64(i)
		if err := projections.Apply(m.state, evs[i]); err != nil {
			m.log.Error("applying a recorded refusal", "err", err)
			return
		}
	}
}
