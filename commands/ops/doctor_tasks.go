package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/corralhq/corral/commands/apipb"
)

// crashLoopRestarts is how many restarts of its own make a live task
// crash-looping in the doctor's eyes, when it is not backing off already.
const crashLoopRestarts = 3

// checkTasks flags the tasks that are crash-looping: live, and backing off
// after failures of their own or restarted crashLoopRestarts times or more.
// It warns rather than fails: a user's program failing is not the cell's
// fault, but it is what an operator wants to see first.
func (d *doctor) checkTasks(ctx context.Context) {
	f := Finding{Check: "tasks"}
	if d.leader == nil {
		f.Severity, f.Summary = Skip, "not checked: no leader answered"
		d.add(f)
		return
	}
	var looping []string
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
			backoff := t.NotBeforeUs > d.now.UnixMicro()
			if !backoff && t.Restarts < crashLoopRestarts {
				continue
			}
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
	switch {
	case len(looping) > 0:
		f.Severity = Warn
		f.Summary = fmt.Sprintf("%d of %d live task(s) crash-looping", len(looping), total)
		if len(looping) > 10 {
			looping = append(looping[:10], fmt.Sprintf("and %d more", len(looping)-10))
		}
		f.Details = looping
		f.Fix = "see why with `corral task get USER/JOB INDEX` and `corral task logs JOB INDEX --stderr`; fix the program, or give it more memory if it was OOMKilled"
	default:
		f.Summary = fmt.Sprintf("none of %d live task(s) is crash-looping", total)
	}
	d.add(f)
}
