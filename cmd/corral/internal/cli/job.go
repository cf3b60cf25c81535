package cli

import "github.com/spf13/cobra"

// jobCommand groups the job verbs, one per file (job_submit.go, job_update.go,
// job_kill.go, job_list.go, job_get.go, job_render.go, job_commit.go,
// job_history.go).
func (a *app) jobCommand() *cobra.Command {
	c := &cobra.Command{Use: "job", Short: "submit, update, kill and inspect jobs"}
	c.AddCommand(a.jobSubmitCommand(), a.jobUpdateCommand(), a.jobKillCommand(), a.jobListCommand(), a.jobGetCommand(),
		a.jobRenderCommand(), a.jobCommitCommand(), a.jobRollbackCommand(), a.jobPromoteCommand(),
		a.jobHistoryCommand(), a.jobRevertCommand(), a.jobPlanCommand())
	c.PersistentFlags().StringArrayVar(&a.jpaths, "jpath", nil, "a folder Jsonnet job files may import from, besides the job file's own (repeatable); imports resolving elsewhere are refused")
	return c
}
