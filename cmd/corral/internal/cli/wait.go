package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

// waited is one job `--wait` follows: a submission (version 0), or the
// update to version.
type waited struct {
	name string
	// owner is the job's user; "" is the caller.
	owner   string
	version int64
	// restarts are the tasks' restart counts at the first look: a task
	// that restarts after it fails the wait.
	restarts map[int32]int32
}

func waitFor(names []string, version int64) []*waited {
	out := make([]*waited, len(names))
	for i, n := range names {
		out[i] = &waited{name: n, version: version}
	}
	return out
}

// verdict is what one look at a waited job says.
type verdict struct {
	progress string
	done     bool
	failed   bool
	message  string // the outcome, once done
}

// judge looks at j for w. A submission is done when every task runs (and,
// with a health check, is healthy) or the job finished; an update when its
// roll is complete and healthy, committed or waiting for a commit or a
// promote. A task that fails meanwhile, an update that halts or reverts,
// fail the wait with the reason.
func (w *waited) judge(j *apipb.JobView) verdict {
	r := j.Rollout
	checked := j.Spec.GetHealthCheck().GetPath() != ""
	v := verdict{progress: fmt.Sprintf("%d pending, %d scheduled, %d running, %d dead", j.Pending, j.Scheduled, j.Running, j.Dead)}
	if checked || w.version != 0 {
		v.progress += fmt.Sprintf(", %d healthy", r.GetSettled())
	}
	if j.UpdateInProgress {
		v.progress += fmt.Sprintf(" (version %d to %d)", j.UpdateFrom, j.UpdateTo)
	}
	if w.restarts == nil {
		w.restarts = map[int32]int32{}
		for _, t := range j.Tasks {
			w.restarts[t.Index] = t.Restarts
		}
	}
	if w.version != 0 {
		switch {
		case j.UpdateInProgress && j.UpdateTo == w.version:
			// An update that commits itself (complete) is waited for
			// until it has.
			switch projections.UpdatePhase(j.UpdatePhase) {
			case projections.UpdateHalted:
				return verdict{progress: v.progress, done: true, failed: true, message: "the update halted: " + j.UpdateHalted}
			case projections.UpdateAwaitingPromote:
				v.done, v.message = true, fmt.Sprintf("canaries healthy on version %d: `corral job promote %s` rolls the rest", w.version, w.name)
			case projections.UpdateAwaitingCommit:
				v.done, v.message = true, fmt.Sprintf("every task healthy on version %d: `corral job commit %s` keeps it", w.version, w.name)
			}
			return v
		case j.LastUpdateVersion == w.version && j.LastUpdateHow != "committed":
			return verdict{progress: v.progress, done: true, failed: true,
				message: fmt.Sprintf("the update was %s%s", j.LastUpdateHow, strings.TrimSuffix(": "+j.LastUpdateReason, ": "))}
		}
		if why, failed := w.taskFailed(j); failed {
			return verdict{progress: v.progress, done: true, failed: true, message: why}
		}
		if r.GetSettled() == r.GetLive() && !j.UpdateInProgress {
			v.done, v.message = true, fmt.Sprintf("version %d committed: every task healthy", j.SpecVersion)
		}
		return v
	}
	if why, failed := w.taskFailed(j); failed {
		return verdict{progress: v.progress, done: true, failed: true, message: why}
	}
	switch {
	case j.State == "dead":
		v.done, v.message = true, fmt.Sprintf("job ended: %d of %d tasks dead", j.Dead, j.TotalTasks)
		if j.EndReason != "" {
			v.message += ": " + j.EndReason
		} else {
			v.message = fmt.Sprintf("finished: all %d tasks", j.TotalTasks)
		}
	case j.Pending+j.Scheduled > 0:
	case checked && r.GetSettled() == r.GetLive():
		v.done, v.message = true, fmt.Sprintf("all %d tasks running and healthy", r.GetLive())
	case !checked && j.Dead == 0:
		v.done, v.message = true, fmt.Sprintf("all %d tasks running (no health check)", j.Running)
	case !checked:
		v.done, v.message = true, fmt.Sprintf("%d running, %d finished, of %d tasks", j.Running, j.Dead, j.TotalTasks)
	}
	return v
}

// taskFailed says which task failed since the first look, if one did: it
// failed, or restarted (a service's clean exit included).
func (w *waited) taskFailed(j *apipb.JobView) (string, bool) {
	for _, t := range j.Tasks {
		failed := t.How == "failed" || t.Restarts > w.restarts[t.Index]
		if failed && j.Spec.GetRestart().GetMode() != "always" && t.How == "finished" {
			failed = false
		}
		if failed {
			why := t.Status
			if t.How == "" && t.Reason != "" {
				why = t.Reason
			}
			return fmt.Sprintf("task %d failed: %s", t.Index, why), true
		}
	}
	return "", false
}

// waitJobs shows the jobs' progress until each is done, a task fails, an
// update halts or reverts, the timeout passes, or a job turns out
// unschedulable; it exits 1 with the reason on all but the first.
func (a *app) waitJobs(ctx context.Context, cl *client, jobs []*waited, minPos int64, timeout time.Duration) error {
	start := time.Now()
	deadline := start.Add(timeout)
	jw := &jobWait{a: a, cl: cl, jobs: jobs, live: isTerminal(a.stderr()), prev: map[string]string{}, stuck: map[string]int{}}
	for {
		look, err := jw.look(ctx, minPos)
		if err != nil {
			jw.clear()
			return err
		}
		elapsed := time.Since(start).Truncate(100 * time.Millisecond)
		done, failed := jw.progress(look, elapsed)
		if done || failed {
			return jw.finished(look, elapsed, failed)
		}
		whys, unschedulable := jw.unschedulable(ctx, look, elapsed)
		if unschedulable || time.Now().After(deadline) {
			return jw.stopped(ctx, look, whys, elapsed, unschedulable)
		}
		select {
		case <-ctx.Done():
			jw.clear()
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// jobWait is one wait for jobs, and what it has seen of them so far.
type jobWait struct {
	a        *app
	cl       *client
	jobs     []*waited
	live     bool   // stderr is a terminal: the progress line is redrawn in place
	lastLine string // the progress line last shown
	prev     map[string]string
	stuck    map[string]int // looks in a row a job's pending tasks placed nowhere
}

// jobsLook is one look at every waited job.
type jobsLook struct {
	verdicts map[string]verdict
	views    map[string]*apipb.JobView
	parts    []string // each job's progress
}

func (w *jobWait) clear() {
	if w.live && w.lastLine != "" {
		fmt.Fprint(w.a.stderr(), "\r\033[K")
	}
}

// look reads every job at or after minPos and judges it.
func (w *jobWait) look(ctx context.Context, minPos int64) (*jobsLook, error) {
	l := &jobsLook{verdicts: map[string]verdict{}, views: map[string]*apipb.JobView{}}
	for _, j := range w.jobs {
		v, err := readValue(ctx, w.cl, apipb.CellClient.Get, &apipb.GetRequest{User: j.owner, Job: j.name, Read: &apipb.ReadOptions{MinPosition: minPos}, TaskLimit: 10000})
		if err != nil {
			return nil, err
		}
		l.views[j.name], l.verdicts[j.name] = v, j.judge(v)
	}
	for _, j := range w.jobs {
		l.parts = append(l.parts, fmt.Sprintf("%s: %s", j.name, l.verdicts[j.name].progress))
	}
	return l, nil
}

// progress shows the look's progress line, and says whether every job is
// done or one failed.
func (w *jobWait) progress(l *jobsLook, elapsed time.Duration) (done, failed bool) {
	done = true
	for _, j := range w.jobs {
		vd := l.verdicts[j.name]
		done = done && vd.done
		failed = failed || vd.failed
	}
	line := strings.Join(l.parts, "; ") + fmt.Sprintf(" (%s)", elapsed)
	if w.live {
		fmt.Fprint(w.a.stderr(), "\r\033[K"+line)
	} else if stripElapsed(line) != stripElapsed(w.lastLine) {
		fmt.Fprintln(w.a.stderr(), line)
	}
	w.lastLine = line
	return done, failed
}

// finished says each done job's outcome; a failed one fails the wait.
func (w *jobWait) finished(l *jobsLook, elapsed time.Duration, failed bool) error {
	w.clear()
	for _, j := range w.jobs {
		if vd := l.verdicts[j.name]; vd.done {
			owner := j.owner
			if owner == "" {
				owner = w.cl.user
			}
			fmt.Fprintf(w.a.stdout(), "%s/%s: %s (%s)\n", owner, j.name, vd.message, elapsed)
		}
	}
	if failed {
		return &silentErr{code: ExitFailed}
	}
	return nil
}

// unschedulable asks why of the jobs with pending tasks. A job whose
// pending tasks the scheduler has examined and placed nowhere, with no
// progress for three looks, will not start by waiting.
func (w *jobWait) unschedulable(ctx context.Context, l *jobsLook, elapsed time.Duration) (map[string]*apipb.WhyPendingReply, bool) {
	whys := map[string]*apipb.WhyPendingReply{}
	unschedulable := false
	for _, j := range w.jobs {
		n, vd := j.name, l.verdicts[j.name]
		if l.views[n].Pending == 0 || elapsed < time.Second {
			w.stuck[n] = 0
			continue
		}
		why, err := readValue(ctx, w.cl, apipb.CellClient.WhyPending, &apipb.WhyPendingRequest{User: j.owner, Job: n})
		if err != nil || len(why.Classes) == 0 || vd.progress != w.prev[n] {
			w.stuck[n] = 0
			continue
		}
		whys[n] = why
		if w.stuck[n]++; w.stuck[n] >= 3 {
			unschedulable = true
		}
	}
	for n, vd := range l.verdicts {
		w.prev[n] = vd.progress
	}
	return whys, unschedulable
}

// stopped ends a wait that timed out or found a job unschedulable: it
// says so, and why each job's tasks are pending.
func (w *jobWait) stopped(ctx context.Context, l *jobsLook, whys map[string]*apipb.WhyPendingReply, elapsed time.Duration, unschedulable bool) error {
	w.clear()
	if unschedulable {
		fmt.Fprintf(w.a.stdout(), "stopped waiting after %s: tasks cannot be scheduled\n", elapsed)
	} else {
		fmt.Fprintf(w.a.stdout(), "timed out after %s: %s\n", elapsed, strings.Join(l.parts, "; "))
	}
	for _, j := range w.jobs {
		why := whys[j.name]
		if why == nil && l.views[j.name].Pending > 0 {
			why, _ = readValue(ctx, w.cl, apipb.CellClient.WhyPending, &apipb.WhyPendingRequest{User: j.owner, Job: j.name})
		}
		if why != nil {
			writeWhy(w.a.stdout(), why)
		}
	}
	return &silentErr{code: ExitFailed}
}

func stripElapsed(line string) string {
	if i := strings.LastIndex(line, " ("); i >= 0 {
		return line[:i]
	}
	return line
}
