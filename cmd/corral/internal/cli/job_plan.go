package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

func (a *app) jobPlanCommand() *cobra.Command {
	var at string
	c := &cobra.Command{
		Use:   "plan FILE",
		Short: "what `corral job update FILE` would do now (or would have done at --at), appending nothing",
		Long: `Plan the update of the jobs of FILE: the changes to the spec in force, what
the update itself does (tasks restarting, killed, added), and what the
scheduling pass after it would do (placements, preemptions with their
victims, tasks that would wait and why), computed by the real command and
the real scheduling pass on a copy of the cell. It prints the log position
it planned at: ` + "`corral job update FILE --if-position P`" + ` applies the update
only if the job has not changed since. A job that does not live is planned
as its submission: would it fit?

With --at, the plan is made on the cell as the log had it at that time or
position: would this job have fit then?`,
		Example: "  corral job plan examples/web-v2.jsonnet\n  corral job update examples/web-v2.jsonnet --if-position 1234\n  corral job plan examples/hello.jsonnet --at 2026-11-26T14:02:00Z",
		Args:    args(1, 1, "a job file"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			var pos, us int64
			if at != "" {
				var err error
				if pos, us, err = parsePointUS(at, time.Now()); err != nil {
					return usageErr("--at: %v", err)
				}
			}
			return a.planFile(cmd.Context(), argv[0], nil, pos, us, false)
		},
	}
	c.Flags().StringVar(&at, "at", "", "plan on the cell as it was then: a time (RFC 3339; 1h for an hour ago) or a log position")
	return c
}

// planFile plans the update of every job of the file at path and prints
// the plans: on the cell now, or as it was at position atPos or time atUS.
// With submit, it plans their submission instead, refused as `job submit`
// would be (a live job of the name): the dry run of job submit.
func (a *app) planFile(ctx context.Context, path string, secrets []string, atPos, atUS int64, submit bool) error {
	cl, err := a.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	f, err := a.loadFileFor(ctx, cl, path)
	if err != nil {
		return err
	}
	if err := a.addSecrets(f, secrets); err != nil {
		return err
	}
	var plans []*apipb.PlanReply
	for _, spec := range f.Jobs {
		p, err := readValue(ctx, cl, apipb.CellClient.PlanUpdate, &apipb.UpdateRequest{Spec: spec, AtPosition: atPos, AtTimeUs: atUS, Submit: submit})
		if err != nil {
			return fmt.Errorf("planning %s: %w", spec.Name, err)
		}
		plans = append(plans, p)
	}
	if a.output != "table" {
		if len(plans) == 1 {
			return a.show(nil, plans[0])
		}
		return a.show(nil, plans)
	}
	me, err := cl.me(ctx)
	if err != nil {
		return err
	}
	for i, p := range plans {
		writePlan(a.stdout(), me+"/"+f.Jobs[i].Name, p)
	}
	allNew := true
	for _, p := range plans {
		allNew = allNew && p.CurrentVersion == 0
	}
	switch {
	case submit:
		a.note("nothing was submitted: `corral job submit %s` does it", path)
	case atPos == 0 && atUS == 0 && allNew:
		a.note("submit it with `corral job submit %s`", path)
	case atPos == 0 && atUS == 0:
		a.note("apply it unless the job changes meanwhile: `corral job update %s --if-position %d`", path, plans[len(plans)-1].Position)
	}
	return nil
}

func writePlan(w io.Writer, job string, p *apipb.PlanReply) {
	if p.SpecVersion == 0 {
		fmt.Fprintf(w, "job %s: no change (planned at position %d)\n", job, p.Position)
		return
	}
	how := "changes in place, no task restarts"
	if p.RestartNeeded {
		how = fmt.Sprintf("a rolling update, %d task(s) disrupted at a time", max(1, p.Proposed.GetUpdate().GetMaxDisruptions()))
	}
	if p.CurrentVersion == 0 {
		fmt.Fprintf(w, "job %s: a new job (planned at position %d)\n", job, p.Position)
		fmt.Fprintln(w, "the submission:")
	} else {
		fmt.Fprintf(w, "job %s: version %d -> %d: %s (planned at position %d)\n", job, p.CurrentVersion, p.SpecVersion, how, p.Position)
		fmt.Fprintln(w, "changes to the spec:")
		for _, d := range projections.SpecChanges(p.Current, p.Proposed) {
			fmt.Fprintf(w, "  %s\n", d)
		}
		fmt.Fprintln(w, "the update:")
	}
	for _, c := range p.Changes {
		fmt.Fprintf(w, "  %s\n", c)
	}
	fmt.Fprintln(w, "then the scheduler:")
	if len(p.Placements) == 0 {
		fmt.Fprintln(w, "  places nothing")
	}
	for _, pl := range p.Placements {
		line := fmt.Sprintf("  places %s on %s", pl.Task, pl.Machine)
		if len(pl.Preempts) > 0 {
			line += fmt.Sprintf(", preempting %v", pl.Preempts)
		}
		fmt.Fprintln(w, line)
	}
	if p.Pending != nil && p.Pending.Pending > 0 {
		fmt.Fprintln(w, "and leaves waiting:")
		writeWhy(w, p.Pending)
	}
}
