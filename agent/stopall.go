package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
)

// ReasonAgentStopping is the stop reason of tasks ended by StopAll.
const ReasonAgentStopping = "agent stopping"

// StopAll stops every live task as a stop request from the master would:
// SIGTERM, then SIGKILL after grace (DefaultGrace when zero); a task waiting
// to restart is ended at once. It waits until every task has ended, or ctx
// is done, and then returns an error naming the tasks still live. The tasks
// end KILLED with reason ReasonAgentStopping, and their events wait for the
// master's next poll like any other. It is how `corral up` stops everything
// on Ctrl-C, tasks too; Run calls it on exit when Config.StopTasksOnExit is
// set.
func (a *Agent) StopAll(ctx context.Context, grace time.Duration) error {
	if grace < 0 {
		return fmt.Errorf("StopAll: grace %s: must not be negative", grace)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return fmt.Errorf("StopAll: the agent is closed")
	}
	for _, t := range a.tasks {
		if Ended(t.state) {
			continue
		}
		if err := a.stopTask(&agentpb.StopTask{Task: t.ref, Reason: ReasonAgentStopping, GracePeriodMs: grace.Milliseconds()}); err != nil {
			a.taskLog(t.key).Warn("stopping a task", "err", err)
		}
	}
	a.mu.Unlock()
	// Exits are noticed by watchers (and, for adopted processes, by polling
	// /proc): check on them rather than thread a signal through every path.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		live := a.liveTasks()
		if len(live) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("StopAll: %d task(s) still live (%s): %w", len(live), strings.Join(live, ", "), ctx.Err())
		case <-tick.C:
		}
	}
}

// liveTasks names the tasks not ended, in order.
func (a *Agent) liveTasks() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k, t := range a.tasks {
		if !Ended(t.state) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
