package commands

import (
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// ElectionEvents returns what a master appends on taking the lead, in one
// append: its LeaderElected and, in a log without a price sheet (a cell
// being created), the cell's first sheet (sheet, or DefaultPriceSheet when
// nil), in force from the beginning so that every bill names the sheet it
// used. The master and the simulation's masters both call it.
func ElectionEvents(s *projections.State, now time.Time, le *events.LeaderElected, sheet *events.PriceSheetSet) ([]events.Event, error) {
	ev := events.New(events.CellStream, now, le)
	ev.Actor = le.Holder
	out := []events.Event{ev}
	if len(s.PriceSheets) > 0 {
		return out, nil
	}
	if sheet == nil {
		sheet = DefaultPriceSheet()
	}
	sheet = cloneSheet(sheet)
	sheet.EffectiveUs = 0
	evs, err := Decide(s, SetPriceSheet{Meta: Meta{Actor: Actor{User: le.Holder, Admin: true}}, Sheet: sheet}, FixedClock(now))
	if err != nil {
		return nil, err
	}
	return append(out, evs...), nil
}
