package master

import (
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/writer"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// Plan is what a command would do at now: its events, and the scheduling
// pass that would follow them, computed by the writer's own decisions and
// the scheduling core on a copy of the cell's state. Nothing is appended. On a cell that does not change meanwhile, the pass that runs
// after the command is appended is this one: the same input at the same
// position, which seeds it.
type Plan struct {
	Position int64          // s's position, planned at
	Events   []events.Event // the command's, positioned after Position
	Pass     *scheduler.Plan
	After    *projections.State // the copy, after the events and the pass's placements
}

// PlanCommand plans cmd at now with the scheduling config cfg on cp, a
// copy of the cell's state that it changes (Plan.After).
func PlanCommand(cp *projections.State, cmd commands.Command, now time.Time, cfg SchedulerConfig) (*Plan, error) {
	out := &Plan{Position: cp.Position, After: cp}
	b := writer.Plan(cp, []writer.Op{{Cmd: cmd}}, 1, 1, writer.NewRecent(1), func() time.Time { return now })
	for _, a := range b.Answers {
		if a.Err != nil {
			return nil, a.Err
		}
	}
	if len(b.Appends) > 0 {
		out.Events = b.Appends[0].Events
	}
	core := NewSchedulingCore(cfg)
	if cell, position, _ := core.Input(cp, now); cell != nil {
		var place *commands.PlaceTasks
		out.Pass, place = core.Plan(cell, position)
		if place != nil {
			// After holds the placements too: what is left pending is
			// what the pass could not place.
			writer.Plan(cp, []writer.Op{{Cmd: *place}}, 1, 1, writer.NewRecent(1), func() time.Time { return now })
		}
	}
	return out, nil
}
