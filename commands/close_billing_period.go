package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// CloseBillingPeriod closes the billing period (a calendar month, UTC) that
// starts at Start. From then on its bill is what the log held at the
// closing event, whenever and wherever it is computed; usage of the period
// recorded later (an agent that was partitioned) is billed in a later
// period as a correction. Only a period that has ended can be closed, and
// only once.
type CloseBillingPeriod struct {
	Meta
	Start time.Time
}

func (c CloseBillingPeriod) decide(s *projections.State, now time.Time) ([]events.Event, error) {
	if err := mustBeAdmin(c.Actor, "closing a billing period"); err != nil {
		return nil, err
	}
	start, end := projections.BillingPeriodOf(c.Start)
	switch {
	case c.Start.IsZero():
		return nil, invalid("period", "must be set, e.g. 2026-11")
	case !start.Equal(c.Start.UTC()):
		return nil, invalid("period", "%s is not the start of a billing period (the first of a month, 00:00 UTC)", c.Start.UTC().Format(time.RFC3339))
	case now.Before(end):
		return nil, refuse(FailedPrecondition, "period", "%s has not ended yet (it ends %s)", start.Format("2006-01"), end.Format(time.RFC3339))
	}
	if pos, closed := s.ClosedPeriods[start.UnixMicro()]; closed {
		return nil, refuse(AlreadyExists, "period", "%s was closed at position %d", start.Format("2006-01"), pos)
	}
	b := newDraft(s, now)
	b.add(events.BillingStream, &events.BillingPeriodClosed{PeriodStartUs: start.UnixMicro(), PeriodEndUs: end.UnixMicro()})
	return b.evs, nil
}
