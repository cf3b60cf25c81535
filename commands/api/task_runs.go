package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
)

// TaskRun is one run of a task as its stream in the log records it: a
// start of its process (or a start that failed) on a machine. Runs are
// numbered from 0, the first since the job was submitted.
type TaskRun struct {
	Number  int
	Machine string
	// Placement is the position of the TaskScheduled the run served;
	// PlacementsBack counts the task's later placements on the same
	// machine, and AgentRun is the agent's number of the run within its
	// placement (from 1, the "--- corral: run N" marker in its log): the
	// agent finds the run's lines by these two.
	Placement      int64
	PlacementsBack int
	AgentRun       int32
	StartedUS      int64
	Ended          string // how it ended (an event type: TaskFailed, TaskEvicted, ...); "" while it runs
	// Restarting: it failed and the agent restarts the task in place, so
	// a later run of the placement is coming, or has come unrecorded yet.
	Restarting bool
}

// TaskRuns folds a task's stream (events.TaskStream, in log order) into
// its runs since its job's last submission, the oldest first. It is the
// one rule of which run is where, for the API's TaskLogs and the web UI's
// task page alike; pure.
func TaskRuns(evs []events.Event) []TaskRun {
	var runs []TaskRun
	var machine string
	var placement int64
	var seen int32 // the agent's runs of the placement already counted
	add := func(e events.Event, m string, agentRun int32) {
		if agentRun <= seen || m != machine {
			return
		}
		seen = agentRun
		runs = append(runs, TaskRun{Number: len(runs), Machine: m, Placement: placement, AgentRun: agentRun, StartedUS: e.OccurredAt.UnixMicro()})
	}
	end := func(m, how string, restarting bool) {
		n := len(runs)
		if n == 0 || runs[n-1].Machine != m || runs[n-1].Placement != placement {
			return
		}
		if runs[n-1].Ended == "" {
			runs[n-1].Ended, runs[n-1].Restarting = how, restarting
		} else if !restarting {
			runs[n-1].Restarting = false // ended in its backoff: no restart came
		}
	}
	for i, e := range evs {
		switch p := e.Data.(type) {
		case *events.TaskSubmitted:
			if p.Reason == "new" {
				runs = nil // a job of the same name submitted anew: another history
			}
			machine, placement, seen = "", 0, 0
		case *events.TaskScheduled:
			machine, placement, seen = p.Machine, e.Position, 0
		case *events.TaskStarted:
			add(e, p.Machine, p.Restarts+1)
		case *events.TaskFailed:
			if restartedBetweenPolls(p, evs[i+1:]) {
				// It ended the run before and names the one that
				// replaced it, whose start follows.
				end(p.Machine, e.Type, false)
				continue
			}
			add(e, p.Machine, p.Restarts+1) // a start that failed ran nothing, but wrote its marker
			end(p.Machine, e.Type, p.WillRestart)
		case *events.TaskFinished:
			end(p.Machine, e.Type, false)
		case *events.TaskEvicted:
			end(p.Machine, e.Type, false)
		case *events.TaskKilled:
			end(p.Machine, e.Type, false)
		case *events.TaskLost:
			end(p.Machine, e.Type, false)
		}
	}
	// The agent tells placements on one machine apart by their run-1
	// markers (every placement that started wrote one, recorded or not):
	// count the later placements on each run's machine.
	// A placement's runs are consecutive, so one pass from the latest does.
	back, last := map[string]int{}, map[string]int64{}
	for i := len(runs) - 1; i >= 0; i-- {
		r := &runs[i]
		if p, ok := last[r.Machine]; ok && p != r.Placement {
			back[r.Machine]++
		}
		last[r.Machine] = r.Placement
		r.PlacementsBack = back[r.Machine]
	}
	return runs
}

// restartedBetweenPolls says whether f, a failure, is the one the agent
// link records for a run that exited and was restarted in place between
// two polls: a TaskStarted of the same restart count follows it at once.
func restartedBetweenPolls(f *events.TaskFailed, next []events.Event) bool {
	if len(next) == 0 {
		return false
	}
	s, ok := next[0].Data.(*events.TaskStarted)
	return ok && f.WillRestart && s.Machine == f.Machine && s.Restarts == f.Restarts
}

// RunOf picks the run a log request asks for among runs: run (from 0, the
// first; negative counts back from the latest, -1 the one before it), or
// with previous the one before the latest. latest says the run asked is
// the task's latest, which its machine serves as any read: after a failure
// the agent restarts in place, that is the run coming after the last
// recorded, which the log may not hold yet. An error says which runs
// there are, for a request that names none of them.
func RunOf(runs []TaskRun, run int32, previous bool) (r TaskRun, latest bool, err error) {
	n := len(runs)
	if n > 0 && runs[n-1].Restarting {
		n++ // the run the agent restarted, recorded or not yet
	}
	i := int(run)
	if previous {
		i = -1
	}
	if i < 0 {
		i = n - 1 + i
	}
	switch {
	case i >= 0 && i < len(runs):
		return runs[i], i == n-1, nil
	case i >= 0 && i < n:
		return TaskRun{Number: i}, true, nil
	}
	asked := fmt.Sprintf("run %d", run)
	if previous {
		asked = "the previous run"
	}
	if len(runs) == 0 {
		return TaskRun{}, false, fmt.Errorf("%s: the task has not run since its job was submitted", asked)
	}
	return TaskRun{}, false, fmt.Errorf("%s: the task has %d run(s) since its job was submitted: %s", asked, len(runs), DescribeRuns(runs))
}

// DescribeRuns lists runs as "0 on m1 (started ..., TaskEvicted), 1 on
// m2 (started ..., latest)", the latest 10 at most.
func DescribeRuns(runs []TaskRun) string {
	var b strings.Builder
	from := max(0, len(runs)-10)
	if from > 0 {
		fmt.Fprintf(&b, "... ")
	}
	for i, r := range runs[from:] {
		if i > 0 {
			b.WriteString(", ")
		}
		how := r.Ended
		switch {
		case how == "" && r.Number == len(runs)-1:
			how = "latest"
		case how == "":
			how = "ended unrecorded" // a restart in place whose end no report carried
		}
		fmt.Fprintf(&b, "%d on %s (started %s, %s)", r.Number, r.Machine, time.UnixMicro(r.StartedUS).UTC().Format(time.RFC3339), how)
	}
	return b.String()
}
