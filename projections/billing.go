package projections

import (
	"time"

	"github.com/corralhq/corral/events"
)

// PriceSheet is one PriceSheetSet of the log.
type PriceSheet struct {
	Position int64 // of its PriceSheetSet: bills cite it
	SetUS    int64 // when it was set
	Sheet    *events.PriceSheetSet
}

// SheetAt returns the sheet in force at us: the one with the latest
// effective time at or before it, the later set of two with the same
// effective time. The one rule the master's replies follow; the
// Infrastore's bills apply the same order in SQL (infrastore/pricing.go).
func (s *State) SheetAt(us int64) (PriceSheet, bool) {
	var best PriceSheet
	found := false
	for _, p := range s.PriceSheets {
		if p.Sheet.EffectiveUs <= us && (!found || p.Sheet.EffectiveUs >= best.Sheet.EffectiveUs) {
			best, found = p, true
		}
	}
	return best, found
}

// BillingPeriodOf returns the billing period (a calendar month, UTC) that
// holds t: [start, end).
func BillingPeriodOf(t time.Time) (start, end time.Time) {
	t = t.UTC()
	start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}
