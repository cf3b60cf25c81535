package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
)

// checkTasks flags the tasks that are crash-looping (live, and backing off
// after failures of their own or restarted crashLoopRestarts times or
// more) and the running tasks whose health check fails.
// It warns rather than fails: a user's program failing is not the cell's
// fault, but it is what an operator wants to see first.
func (d *doctor) checkTasks(ctx context.Context) {
	f := Finding{Check: "tasks"}
	if d.leader == nil {
		f.Severity, f.Summary = Skip, "not checked: no leader answered"
		d.add(f)
		return
	}
	var looping, unhealthy []string
	total := 0
	for offset := int32(0); ; {
		cctx, cancel := d.ctx(ctx)
		l, err := d.leader.ListTasks(cctx, &apipb.ListTasksRequest{Offset: offset, Limit: 1000})
		cancel()
		if err != nil {
			f.Severity, f.Summary, f.Fix = Fail, "cannot list the tasks: "+grpcMessage(err), "see the masters' logs"
			d.add(f)
			return
		}
		for _, t := range l.Tasks {
			if t.State == "dead" {
				continue
			}
			total++
			if t.Health == "unhealthy" {
				unhealthy = append(unhealthy, fmt.Sprintf("%s/%s/%d on %s: %s", t.User, t.Job, t.Index, t.Machine, t.HealthMessage))
			}
			if !t.CrashLooping {
				continue
			}
			backoff := t.NotBeforeUs > d.now.UnixMicro()
			line := fmt.Sprintf("%s/%s/%d: %d restarts", t.User, t.Job, t.Index, t.Restarts)
			if backoff {
				line += ", backing off until " + time.UnixMicro(t.NotBeforeUs).UTC().Format(time.RFC3339)
			}
			if t.Reason != "" {
				line += ": " + t.Reason
			}
			looping = append(looping, line)
		}
		offset += int32(len(l.Tasks))
		if len(l.Tasks) == 0 || offset >= l.Total {
			break
		}
	}
	atMost10 := func(lines []string) []string {
		if len(lines) > 10 {
			return append(lines[:10:10], fmt.Sprintf("and %d more", len(lines)-10))
		}
		return lines
	}
	var parts []string
	if len(looping) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d live task(s) crash-looping", len(looping), total))
		f.Details = append(f.Details, atMost10(looping)...)
		f.Fix = "see why with `corral task get USER/JOB INDEX` and `corral task logs JOB INDEX --stderr`; fix the program, or give it more memory if it was OOMKilled"
	}
	if len(unhealthy) > 0 {
		parts = append(parts, fmt.Sprintf("%d running task(s) failing their health check", len(unhealthy)))
		f.Details = append(f.Details, atMost10(unhealthy)...)
		f.Fix = strings.TrimPrefix(f.Fix+"; an unhealthy task is restarted once its check fails more than failures_allowed times: `corral task logs JOB INDEX --stderr` shows what it answers", "; ")
	}
	if len(parts) > 0 {
		f.Severity, f.Summary = Warn, strings.Join(parts, "; ")
	} else {
		f.Summary = fmt.Sprintf("none of %d live task(s) is crash-looping or unhealthy", total)
	}
	d.add(f)
}
