package cli

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

func (a *app) jobListCommand() *cobra.Command {
	var selector, state, owner string
	var all bool
	var limit int
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list jobs",
		Args:    args(0, 0, "no arguments"),
		RunE: a.withClient(func(cmd *cobra.Command, cl *client, _ []string) error {
			user, err := cl.me(cmd.Context())
			if err != nil {
				return err
			}
			if owner != "" {
				user = owner
			}
			if all {
				user = ""
			}
			if limit < 0 {
				return usageErr("--limit %d: want 0 (every job) or more", limit)
			}
			// The master answers at most a page at a time: page through
			// until every job (or --limit) is read.
			page := jobListPage
			l := &apipb.JobList{}
			for {
				want := page
				if limit > 0 {
					want = min(page, limit-len(l.Jobs))
				}
				p, err := readValue(cmd.Context(), cl, apipb.CellClient.List, &apipb.ListRequest{User: user, Selector: selector, State: state,
					Offset: int32(len(l.Jobs)), Limit: int32(want)})
				if err != nil {
					return err
				}
				l.Jobs, l.Total, l.Position = append(l.Jobs, p.Jobs...), p.Total, p.Position
				if len(p.Jobs) < want || int(p.Total) <= len(l.Jobs) || limit > 0 && len(l.Jobs) >= limit {
					break
				}
			}
			if left := int(l.Total) - len(l.Jobs); left > 0 {
				defer a.note("(%d of %d jobs shown; --limit 0 shows every one)", len(l.Jobs), l.Total)
			}
			now := time.Now()
			t := &table{cols: []string{"JOB", "STATE", "PRIORITY", "RUNNING", "PENDING", "DEAD", "TASKS", "AGE", "LABELS"}}
			for _, j := range l.Jobs {
				p := j.Spec.GetPriority()
				t.add(j.Spec.GetUser()+"/"+j.Spec.GetName(), j.State, fmt.Sprintf("%d (%s)", p, projections.BandOf(p)),
					strconv.Itoa(int(j.Running+j.Scheduled)), strconv.Itoa(int(j.Pending)), strconv.Itoa(int(j.Dead)),
					strconv.Itoa(int(j.TotalTasks)), ago(j.SubmittedUs, now), labelsText(j.Spec.GetLabels()))
			}
			if len(l.Jobs) == 0 && a.output == "table" {
				a.note("no jobs%s; submit one with `corral job submit examples/hello.jsonnet`", forWhom(user))
			}
			return a.show(t, protoList(l.Jobs))
		}),
	}
	c.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. team=web")
	c.Flags().StringVar(&state, "state", "", "only jobs in this state: pending, running or dead")
	c.Flags().StringVar(&owner, "owner", "", "list another user's jobs")
	c.Flags().BoolVarP(&all, "all", "A", false, "list every user's jobs")
	c.Flags().IntVar(&limit, "limit", 0, "show at most this many jobs (default 0: every one)")
	return c
}

func forWhom(user string) string {
	if user == "" {
		return ""
	}
	return " of " + user
}

func labelsText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return orDash(strings.Join(parts, ","))
}
