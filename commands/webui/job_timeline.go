package webui

import (
	"context"

	"github.com/corralhq/corral/commands/apipb"
)

// timelineLimit is how many of a job's events its page shows at once.
const timelineLimit = 50

// timelineMaxSpan bounds the log positions one page of a timeline reads:
// a job whose events are sparse in a busy log is paged back a span at a
// time rather than read whole.
const timelineMaxSpan = 200_000

// timeline is a page of a job's events, newest first, as Kubernetes and
// Nomad show events: the latest change of a busy service is on top.
type timeline struct {
	Events []*apipb.EventView // newest first
	// Earlier is the position to page back from (the events at or before
	// it), 0 when the page reaches the job's submission.
	Earlier int64
}

// jobTimeline reads the newest timelineLimit events of a job at or before
// position before (0: the head). The API reads the log forward, so it asks
// for a span of positions ending at before, four times wider each time
// until the span holds a page of the job's events, reaches the job's
// submission or spans timelineMaxSpan. Events before the submission
// (a second's leeway, for clocks) belong to an earlier job of that name.
func jobTimeline(ctx context.Context, api interface {
	Events(context.Context, *apipb.EventsRequest) (*apipb.EventList, error)
}, user, name string, submittedUs, before int64) (timeline, error) {
	var tl timeline
	first, err := api.Events(ctx, &apipb.EventsRequest{User: user, Job: name, SinceUs: submittedUs - 1_000_000, Limit: 1})
	if err != nil {
		return tl, err
	}
	if len(first.Events) == 0 {
		return tl, nil
	}
	start := first.Events[0].Position // the job's first event
	to := first.Head
	if before > 0 && before < to {
		to = before
	}
	if to < start {
		return tl, nil
	}
	var kept []*apipb.EventView
	var lo int64
	for span := int64(timelineLimit); ; span *= 4 {
		lo = max(start, to-min(span, timelineMaxSpan)+1)
		// At most to-lo+1 events of the span match, and they come first.
		evs, err := api.Events(ctx, &apipb.EventsRequest{User: user, Job: name, FromPosition: lo, Limit: int32(to - lo + 1)})
		if err != nil {
			return tl, err
		}
		kept = kept[:0]
		for _, e := range evs.Events {
			if e.Position <= to {
				kept = append(kept, e)
			}
		}
		if len(kept) >= timelineLimit || lo == start || span >= timelineMaxSpan {
			break
		}
	}
	if len(kept) > timelineLimit {
		kept = kept[len(kept)-timelineLimit:]
		lo = kept[0].Position
	}
	for i := len(kept) - 1; i >= 0; i-- {
		tl.Events = append(tl.Events, kept[i])
	}
	if lo > start {
		tl.Earlier = lo - 1
	}
	return tl, nil
}
