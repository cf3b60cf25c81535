package commands

import (
	"fmt"
	"time"
)

// MomentSkew is how far past now a moment may be and still count as now:
// the CLI reads its own clock, the master its own, and two clocks a few
// seconds apart must not refuse `--at now`.
const MomentSkew = time.Minute

// earliestMoment is the first moment a cell's log can hold: no event is
// stamped before the Unix epoch, and a time before it is a mistake (or an
// overflow), never a question about the cell.
var earliestMoment = time.Unix(0, 0)

// CheckPastMoment is the one rule for a moment a reader asks the cell's
// past about (state at, plans and diffs at, the what-if's start): it must
// lie between the Unix epoch and now (give or take MomentSkew). A moment
// in the future is refused, not answered with the present, and one before
// the epoch (an overflowed duration) is refused, not wrapped around. field
// names the argument in the refusal (the CLI's flag, the API's field).
func CheckPastMoment(field string, t, now time.Time) error {
	switch {
	case t.Before(earliestMoment):
		return &Error{Code: InvalidArgument, Field: field,
			Msg: fmt.Sprintf("%s is before 1970-01-01: no cell's log reaches back that far", t.UTC().Format(time.RFC3339))}
	case t.After(now.Add(MomentSkew)):
		return &Error{Code: InvalidArgument, Field: field,
			Msg: fmt.Sprintf("%s is in the future (now is %s): the log answers only for the past", t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))}
	}
	return nil
}
