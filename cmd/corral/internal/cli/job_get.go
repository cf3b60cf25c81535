package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/cmd/corral/internal/jobfile"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

func (a *app) jobGetCommand() *cobra.Command {
	var owner string
	var spec bool
	c := &cobra.Command{
		Use:   "get NAME",
		Short: "show a job and its tasks",
		Long: `Show a job and its tasks. -o json and yaml give the API's view of it.

With --spec, print only the spec in force as a job file (JSON, or -o yaml),
the format job submit, update and plan read: edit it and update the job
with it. Secret values are not in it: give them with --secret again.`,
		Example:           "  corral job get web\n  corral job get web --spec -o yaml > web.yaml && corral job update web.yaml",
		Args:              args(1, 1, "one job name"),
		ValidArgsFunction: a.completeJobs,
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, argv []string) error {
			j, err := readValue(cmd.Context(), cl, apipb.CellClient.Get, &apipb.GetRequest{User: owner, Job: argv[0], TaskLimit: 10000})
			if err != nil {
				return err
			}
			if spec {
				return a.writeSpecFile(j.Spec)
			}
			if a.output != "table" {
				return a.show(tasksTable(j.Tasks, time.Now()), j)
			}
			s := j.Spec
			w := a.stdout()
			now := time.Now()
			fmt.Fprintf(w, "job:        %s/%s (version %d)\n", s.GetUser(), s.GetName(), j.SpecVersion)
			fmt.Fprintf(w, "state:      %s: %d running, %d scheduled, %d pending, %d dead of %d tasks\n", j.State, j.Running, j.Scheduled, j.Pending, j.Dead, j.TotalTasks)
			fmt.Fprintf(w, "priority:   %d (%s)\n", s.GetPriority(), projections.BandOf(s.GetPriority()))
			fmt.Fprintf(w, "command:    %s\n", commandLine(s.GetCommand(), s.GetArgs()))
			fmt.Fprintf(w, "resources:  %s per task\n", resourcesText(s.GetResources()))
			fmt.Fprintf(w, "labels:     %s\n", labelsText(s.GetLabels()))
			fmt.Fprintf(w, "submitted:  %s (%s ago)\n", timeText(j.SubmittedUs), ago(j.SubmittedUs, now))
			fmt.Fprintf(w, "dns:        %s\n", strings.TrimSuffix(jobDNS(s.GetName(), s.GetUser(), a.cellOf(cmd.Context(), cl)), "."))
			if j.EndedUs != 0 {
				fmt.Fprintf(w, "ended:      %s: %s\n", timeText(j.EndedUs), j.EndReason)
			}
			if j.UpdateInProgress {
				fmt.Fprintf(w, "update:     %s\n", updateText(j))
			}
			if j.LastUpdateHow != "" {
				fmt.Fprintf(w, "last update: version %d %s%s\n", j.LastUpdateVersion, j.LastUpdateHow, strings.TrimSuffix(": "+j.LastUpdateReason, ": "))
			}
			if j.Deferred {
				fmt.Fprintf(w, "deferred:   starts after %s finishes\n", s.GetStartAfter())
			}
			fmt.Fprintln(w)
			return writeTable(w, tasksTable(j.Tasks, now), "table")
		}),
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	c.Flags().BoolVar(&spec, "spec", false, "print the spec in force as a job file (JSON, or -o yaml) that job submit and update read back")
	return c
}

// writeSpecFile prints s in the job file format (jobfile.SpecObject, as job
// render does), without the redacted values of its secret variables: the
// file names them in secret_env, and their values come with --secret.
func (a *app) writeSpecFile(s *events.JobSpec) error {
	s = proto.Clone(s).(*events.JobSpec)
	for _, name := range s.SecretEnv {
		delete(s.Env, name)
	}
	format := "json"
	if a.output == "yaml" {
		format = "yaml"
	}
	out, err := jobfile.Marshal(jobfile.SpecObject(s), format)
	if err != nil {
		return err
	}
	_, err = a.stdout().Write(out)
	return err
}

// updateText words a job's open update: how far it rolled, and what it
// waits for.
func updateText(j *apipb.JobView) string {
	name, r := j.Spec.GetName(), j.Rollout
	progress := fmt.Sprintf("version %d to %d: %d of %d tasks healthy on it", j.UpdateFrom, j.UpdateTo, r.GetSettled(), r.GetLive())
	switch projections.UpdatePhase(j.UpdatePhase) {
	case projections.UpdateHalted:
		return fmt.Sprintf("halted, %s: %s (`corral job rollback %s`, or `corral job commit %s` to force it through)", progress, j.UpdateHalted, name, name)
	case projections.UpdateAwaitingPromote:
		return fmt.Sprintf("canaries healthy, %s: `corral job promote %s` rolls the rest, `corral job rollback %s` undoes them", progress, name, name)
	case projections.UpdateAwaitingCommit:
		return fmt.Sprintf("every task healthy, %s: `corral job commit %s` keeps it", progress, name)
	case projections.UpdateComplete:
		return fmt.Sprintf("every task healthy, %s: it commits itself", progress)
	}
	return fmt.Sprintf("rolling %s, %d disrupted (`corral job commit %s` or `corral job rollback %s`)", progress, r.GetDisrupted(), name, name)
}
