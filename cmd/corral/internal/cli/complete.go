package cli

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/commands/apipb"
)

// completionTimeout bounds what a completion asks of the master: a shell
// waiting on a Tab must not hang on a cell that is down.
const completionTimeout = 2 * time.Second

// outputFormats are the values of --output.
var outputFormats = []string{"table", "json", "yaml", "csv"}

// completeJobs completes a job name, the command's only argument: the live
// jobs of the caller (or of --user), asked of the master.
func (a *app) completeJobs(cmd *cobra.Command, argv []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(argv) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.jobNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeTask completes JOB INDEX: a job name, then the indexes of its
// tasks.
func (a *app) completeTask(cmd *cobra.Command, argv []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(argv) {
	case 0:
		return a.jobNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
	case 1:
		var out []string
		a.completionRead(cmd, func(ctx context.Context, c apipb.CellClient) error {
			j, err := c.Get(ctx, &apipb.GetRequest{Job: argv[0], TaskLimit: 10000})
			if err != nil {
				return err
			}
			for _, t := range j.Tasks {
				if i := strconv.Itoa(int(t.Index)); strings.HasPrefix(i, toComplete) {
					out = append(out, i)
				}
			}
			return nil
		})
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

func (a *app) jobNames(cmd *cobra.Command, prefix string) []string {
	var out []string
	a.completionRead(cmd, func(ctx context.Context, c apipb.CellClient) error {
		// The caller's jobs: with credentials, their name, not $USER.
		who, err := c.WhoAmI(ctx, &apipb.WhoAmIRequest{})
		if err != nil {
			return err
		}
		l, err := c.List(ctx, &apipb.ListRequest{User: who.GetUser()})
		if err != nil {
			return err
		}
		for _, j := range l.Jobs {
			if name := j.GetSpec().GetName(); strings.HasPrefix(name, prefix) && j.State != "dead" {
				out = append(out, name)
			}
		}
		return nil
	})
	return out
}

// completionRead runs one read for a completion; a failure completes
// nothing, silently.
func (a *app) completionRead(cmd *cobra.Command, fn func(ctx context.Context, c apipb.CellClient) error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	cl, err := a.client()
	if err != nil {
		return
	}
	defer cl.Close()
	_ = cl.read(ctx, fn)
}

// completeOutput completes --output.
func completeOutput(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return outputFormats, cobra.ShellCompDirectiveNoFileComp
}
