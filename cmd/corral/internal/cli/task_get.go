package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) taskGetCommand() *cobra.Command {
	var owner string
	c := &cobra.Command{
		Use:               "get JOB INDEX",
		Short:             "show one task: where it runs, its address and DNS names, its usage",
		Args:              args(1, 2, "JOB INDEX or JOB/INDEX"),
		ValidArgsFunction: a.completeTask,
		RunE: func(cmd *cobra.Command, argv []string) error {
			job, index, err := taskArg(argv)
			if err != nil {
				return err
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			t, err := a.getTask(cmd.Context(), cl, owner, job, index)
			if err != nil {
				return err
			}
			cell := a.cellOf(cmd.Context(), cl)
			names := []string{strings.TrimSuffix(taskDNS(t.Index, t.Job, t.User, cell), "."), strings.TrimSuffix(jobDNS(t.Job, t.User, cell), ".")}
			if a.output != "table" {
				js, err := jsonOf(t)
				if err != nil {
					return err
				}
				var m map[string]any
				if err := json.Unmarshal(js, &m); err != nil {
					return err
				}
				m["dns_names"] = names
				return a.show(nil, m)
			}
			w := a.stdout()
			now := time.Now()
			fmt.Fprintf(w, "task:         %s/%s/%d\n", t.User, t.Job, t.Index)
			fmt.Fprintf(w, "state:        %s since %s (%s ago)\n", t.Status, timeText(t.SinceUs), ago(t.SinceUs, now))
			if t.Reason != "" {
				fmt.Fprintf(w, "reason:       %s\n", t.Reason)
			}
			fmt.Fprintf(w, "machine:      %s\n", orDash(t.Machine))
			fmt.Fprintf(w, "address:      %s\n", orDash(t.Address))
			if len(t.Ports) > 0 {
				ports := make([]string, len(t.Ports))
				for i, p := range t.Ports {
					ports[i] = strconv.Itoa(int(p))
				}
				fmt.Fprintf(w, "ports:        %s\n", strings.Join(ports, ", "))
			}
			fmt.Fprintf(w, "dns:          %s (A, SRV)\n", names[0])
			fmt.Fprintf(w, "              %s (SRV of every running task)\n", names[1])
			fmt.Fprintf(w, "priority:     %d\n", t.Priority)
			fmt.Fprintf(w, "spec version: %d\n", t.SpecVersion)
			fmt.Fprintf(w, "restarts:     %d (last exit code %d)\n", t.Restarts, t.ExitCode)
			fmt.Fprintf(w, "limit:        %s\n", resourcesText(t.Limit))
			fmt.Fprintf(w, "reservation:  %s\n", resourcesText(t.Reservation))
			fmt.Fprintf(w, "usage:        cpu %.2f cores, memory %s\n", t.CpuCoresUsed, bytesHuman(t.MemoryBytesUsed))
			return nil
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "the job's owner (default you)")
	return c
}
