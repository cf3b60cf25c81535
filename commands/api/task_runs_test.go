package api_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/events"
)

// TestTaskRuns: over generated task histories (placements on a few
// machines, each restarting in place a few times, some starts recorded
// twice by repeated reports, some failing before they ran, then ended
// by an eviction or a failure), TaskRuns numbers every recorded run from
// 0 in order, names its machine, the agent's run number within its
// placement, and the later placements on the same machine, which is how
// the agent finds the run's lines. A job submitted anew starts over.
func TestTaskRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := range 300 {
		evs, wants, places := randomRuns(rng, trial)
		runs := api.TaskRuns(evs)
		if len(runs) != len(wants) {
			t.Fatalf("trial %d: %d runs, want %d: %+v", trial, len(runs), len(wants), runs)
		}
		checkRuns(t, trial, runs, wants, places)
		// RunOf: previous is the one before the latest; -1 the same; an
		// unknown run lists them.
		prev, _, err := api.RunOf(runs, 0, true)
		if len(runs) < 2 {
			if err == nil || !strings.Contains(err.Error(), "the previous run") {
				t.Fatalf("trial %d: previous of one run = %+v, %v; want an error", trial, prev, err)
			}
			continue
		}
		back, _, _ := api.RunOf(runs, -1, false)
		if err != nil || prev.Number != len(runs)-2 || back != prev {
			t.Fatalf("trial %d: previous = %+v, %v; -1 = %+v; want run %d", trial, prev, err, back, len(runs)-2)
		}
		last := runs[len(runs)-1]
		if _, _, err := api.RunOf(runs, int32(len(runs)), false); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d on %s", last.Number, last.Machine)) {
			t.Fatalf("trial %d: run %d of %d: %v, want an error listing the runs", trial, len(runs), len(runs), err)
		}
	}
}

// wantRun is what a run of a random history must be found to be.
type wantRun struct {
	machine  string
	agentRun int32
	place    int
	ended    string
}

// randomRuns is a task's random history of placements and runs (every
// fifth trial after a forgotten earlier job of the same name), the runs
// TaskRuns must find in it, and each placement's machine.
func randomRuns(rng *rand.Rand, trial int) (evs []events.Event, wants []wantRun, places []string) {
	machines := []string{"m1", "m2", "m3"}
	pos := int64(0)
	add := func(p events.Payload) {
		pos++
		e := events.New(events.TaskStream("alice", "web", 0), time.Unix(pos, 0), p)
		e.Position = pos
		evs = append(evs, e)
	}
	if trial%5 == 4 { // an earlier job of the same name, forgotten
		add(&events.TaskSubmitted{User: "alice", Job: "web", Reason: "new"})
		add(&events.TaskScheduled{User: "alice", Job: "web", Machine: "m9"})
		add(&events.TaskStarted{User: "alice", Job: "web", Machine: "m9"})
	}
	add(&events.TaskSubmitted{User: "alice", Job: "web", Reason: "new"})
	for range 1 + rng.IntN(5) {
		m := machines[rng.IntN(len(machines))]
		add(&events.TaskScheduled{User: "alice", Job: "web", Machine: m})
		places = append(places, m)
		for r := range int32(1 + rng.IntN(3)) {
			ended := ""
			if rng.IntN(4) == 0 { // a start that failed: recorded by its failure only
				add(&events.TaskFailed{User: "alice", Job: "web", Machine: m, Restarts: r, WillRestart: true})
				ended = "TaskFailed"
			} else {
				if r > 0 && rng.IntN(3) == 0 { // it exited and restarted between two polls
					add(&events.TaskFailed{User: "alice", Job: "web", Machine: m, Restarts: r, WillRestart: true})
				}
				add(&events.TaskStarted{User: "alice", Job: "web", Machine: m, Restarts: r})
				if rng.IntN(3) == 0 { // a report repeated
					add(&events.TaskStarted{User: "alice", Job: "web", Machine: m, Restarts: r})
				}
			}
			wants = append(wants, wantRun{m, r + 1, len(places) - 1, ended})
		}
		if w := &wants[len(wants)-1]; w.ended == "" {
			w.ended = "TaskEvicted"
		}
		add(&events.TaskEvicted{User: "alice", Job: "web", Machine: m, Reason: "drain"})
		add(&events.TaskSubmitted{User: "alice", Job: "web", Reason: "rescheduled"})
	}
	return evs, wants, places
}

// checkRuns compares the runs found with those wanted.
func checkRuns(t *testing.T, trial int, runs []api.TaskRun, wants []wantRun, places []string) {
	t.Helper()
	for i, w := range wants {
		later := map[int]bool{}
		for p := w.place + 1; p < len(places); p++ {
			if places[p] == w.machine {
				later[p] = true
			}
		}
		r := runs[i]
		if r.Number != i || r.Machine != w.machine || r.AgentRun != w.agentRun || r.PlacementsBack != len(later) {
			t.Fatalf("trial %d: run %d = %+v, want machine %s, agent run %d, %d later placements there", trial, i, r, w.machine, w.agentRun, len(later))
		}
		// A failed start ended its run; a placement's last run else
		// ended by the eviction; the others' ends are not recorded.
		if w.ended != "" && r.Ended != w.ended {
			t.Fatalf("trial %d: run %d ended by %q, want %q", trial, i, r.Ended, w.ended)
		}
	}
}

// TestPreviousWhileTheAgentRestarts: the latest recorded run failed and
// the agent restarts the task in place; the log may not hold the new
// run's start yet, and its machine serves it as the latest. --previous is
// the failed run, found by its marker; a kill in the backoff means no
// restart came, and the failed run is the latest again.
func TestPreviousWhileTheAgentRestarts(t *testing.T) {
	var evs []events.Event
	add := func(p events.Payload) {
		e := events.New(events.TaskStream("alice", "web", 0), time.Unix(int64(len(evs)), 0), p)
		e.Position = int64(len(evs) + 1)
		evs = append(evs, e)
	}
	add(&events.TaskSubmitted{User: "alice", Job: "web", Reason: "new"})
	add(&events.TaskScheduled{User: "alice", Job: "web", Machine: "m1"})
	add(&events.TaskStarted{User: "alice", Job: "web", Machine: "m1"})
	add(&events.TaskFailed{User: "alice", Job: "web", Machine: "m1", WillRestart: true})
	runs := api.TaskRuns(evs)
	prev, latest, err := api.RunOf(runs, 0, true)
	if err != nil || latest || prev.Number != 0 || prev.AgentRun != 1 {
		t.Fatalf("previous while restarting = %+v, latest %v, %v; want run 0 by its marker", prev, latest, err)
	}
	if _, latest, err := api.RunOf(runs, 1, false); err != nil || !latest {
		t.Fatalf("run 1 while restarting: latest %v, %v; want the latest, read as any read", latest, err)
	}
	add(&events.TaskKilled{User: "alice", Job: "web", Machine: "m1"})
	if _, _, err := api.RunOf(api.TaskRuns(evs), 0, true); err == nil {
		t.Fatalf("previous after a kill in the backoff: no error, want none before the only run")
	}
}
