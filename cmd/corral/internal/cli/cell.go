package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

func (a *app) machineCommand() *cobra.Command {
	c := &cobra.Command{Use: "machine", Short: "list machines, drain them for maintenance, retire them"}
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list the cell's machines with what is placed on them",
		Args:    args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			l, err := readValue(cmd.Context(), cl, apipb.CellClient.ListMachines, &apipb.ListMachinesRequest{})
			if err != nil {
				return err
			}
			if len(l.Machines) == 0 && a.output == "table" {
				a.note("no machines have registered: start agents with `corral agent --master %s` (or use `corral up`)", a.masterAddr())
			}
			return a.show(machinesTable(l.Machines), protoList(l.Machines))
		},
	}
	drain := func(use, short string, draining bool) *cobra.Command {
		var (
			reason      string
			wait, force bool
			timeout     time.Duration
		)
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  args(1, -1, "machine names"),
			RunE: func(cmd *cobra.Command, argv []string) error {
				cl, err := a.client()
				if err != nil {
					return err
				}
				defer cl.Close()
				set := func(m string, force bool) (*apipb.MutationReply, error) {
					rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
						return c.DrainMachine(ctx, &apipb.DrainMachineRequest{RequestId: id, Machine: m, Draining: draining, Reason: reason, Force: force}, o...)
					})
					if err != nil {
						return nil, fmt.Errorf("machine %s: %w", m, err)
					}
					return rep, nil
				}
				for _, m := range argv {
					rep, err := set(m, false)
					if err != nil {
						return err
					}
					fmt.Fprintf(a.stdout(), "machine %s: %s\n", m, rep.Message)
					if force {
						// Say what forcing breaks before it does: the jobs
						// whose budgets hold tasks after the budgeted drain.
						v, err := a.readMachine(cmd.Context(), cl, m, rep.LastPosition)
						if err != nil {
							return err
						}
						if len(v.DrainHolds) == 0 {
							fmt.Fprintf(a.stdout(), "machine %s: --force breaks no disruption budget\n", m)
						} else {
							fmt.Fprintf(a.stdout(), "machine %s: --force evicts %d task(s) now, taking these jobs past their disruption budget (update.max_disruptions):\n", m, v.Tasks)
							for _, h := range v.DrainHolds {
								fmt.Fprintf(a.stdout(), "  %s\n", h)
							}
						}
						rep, err = set(m, true)
						if err != nil {
							return err
						}
						fmt.Fprintf(a.stdout(), "machine %s: forced: %s\n", m, rep.Message)
					}
					if wait {
						if err := a.waitDrained(cmd.Context(), cl, m, rep.LastPosition, timeout); err != nil {
							return err
						}
					}
				}
				return nil
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
		if draining {
			c.Flags().BoolVarP(&wait, "wait", "w", false, "show the drain's progress (tasks left, the jobs whose disruption budgets hold them) until the machine holds no task")
			c.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "with --wait: give up after this long")
			c.Flags().BoolVar(&force, "force", false, "emergencies: evict every task at once, below jobs' disruption budgets; says first which jobs it takes past their budget")
		}
		return c
	}
	var reason string
	remove := &cobra.Command{
		Use:   "remove MACHINE...",
		Short: "retire machines: their tasks go back to pending (stop their agents first, or they register again)",
		Args:  args(1, -1, "machine names"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			for _, m := range argv {
				rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
					return c.RemoveMachine(ctx, &apipb.RemoveMachineRequest{RequestId: id, Machine: m, Reason: reason}, o...)
				})
				if err != nil {
					return fmt.Errorf("machine %s: %w", m, err)
				}
				fmt.Fprintf(a.stdout(), "machine %s removed: %s\n", m, rep.Message)
			}
			return nil
		},
	}
	remove.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
	c.AddCommand(list,
		drain("drain MACHINE...", "stop placing tasks on machines and move their tasks elsewhere, within each job's disruption budget", true),
		drain("undrain MACHINE...", "let the scheduler place tasks on machines again", false),
		remove)
	return c
}

func machinesTable(ms []*apipb.MachineView) *table {
	t := &table{cols: []string{"MACHINE", "STATE", "ADDRESS", "TASKS", "CPU (RESERVED/CAPACITY)", "MEMORY (RESERVED/CAPACITY)", "CPU USED", "MEMORY USED", "ATTRIBUTES"}}
	for _, m := range ms {
		state := m.State
		if m.Draining {
			state += ", draining"
			if m.Tasks > 0 {
				state += fmt.Sprintf(", %d tasks left", m.Tasks)
			}
		}
		if m.Reason != "" {
			state += " (" + m.Reason + ")"
		}
		t.add(m.Name, state, m.Address, strconv.Itoa(int(m.Tasks)),
			cores(m.Reserved.GetCpuMilli())+"/"+cores(m.Capacity.GetCpuMilli()),
			bytesHuman(m.Reserved.GetMemoryBytes())+"/"+bytesHuman(m.Capacity.GetMemoryBytes()),
			strconv.FormatFloat(m.CpuCoresUsed, 'f', 2, 64), bytesHuman(m.MemoryBytesUsed), labelsText(m.Attributes))
	}
	return t
}

// resourceFlags are --cpu, --memory, --disk and --ports.
type resourceFlags struct{ cpu, memory, disk string }

func (r *resourceFlags) add(c *cobra.Command, what string) {
	c.Flags().StringVar(&r.cpu, "cpu", "", what+" CPU: cores (2, 0.5) or millicores (500m)")
	c.Flags().StringVar(&r.memory, "memory", "", what+" memory: 8GiB, 512MiB, ...")
	c.Flags().StringVar(&r.disk, "disk", "", what+" disk: 100GiB, ...")
}

func (r *resourceFlags) resources(ports int32) (*events.Resources, error) {
	out := &events.Resources{Ports: ports}
	var err error
	if r.cpu != "" {
		if out.CpuMilli, err = commands.ParseMilli(r.cpu); err != nil {
			return nil, usageErr("--cpu: %v", err)
		}
	}
	if r.memory != "" {
		if out.MemoryBytes, err = commands.ParseBytes(r.memory); err != nil {
			return nil, usageErr("--memory: %v", err)
		}
	}
	if r.disk != "" {
		if out.DiskBytes, err = commands.ParseBytes(r.disk); err != nil {
			return nil, usageErr("--disk: %v", err)
		}
	}
	return out, nil
}

func (a *app) quotaCommand() *cobra.Command {
	c := &cobra.Command{Use: "quota", Short: "show and set users' quota per priority band"}
	get := &cobra.Command{
		Use:   "get [USER]",
		Short: "show quota granted and in use (default: yours; --all: everyone's)",
		Args:  args(0, 1, "at most one user"),
	}
	var all bool
	get.Flags().BoolVarP(&all, "all", "A", false, "every user's quota")
	get.RunE = func(cmd *cobra.Command, argv []string) error {
		cl, err := a.client()
		if err != nil {
			return err
		}
		defer cl.Close()
		user, err := cl.me(cmd.Context())
		if err != nil {
			return err
		}
		if len(argv) == 1 {
			user = argv[0]
		}
		if all {
			user = ""
		}
		l, err := readValue(cmd.Context(), cl, apipb.CellClient.GetQuota, &apipb.GetQuotaRequest{User: user})
		if err != nil {
			return err
		}
		t := &table{cols: []string{"USER", "BAND", "GRANTED", "IN USE"}}
		for _, q := range l.Quotas {
			granted := resourcesText(q.Granted)
			if q.Unlimited {
				granted = "unlimited"
			}
			t.add(q.User, q.Band, granted, resourcesText(q.InUse))
		}
		if len(l.Quotas) == 0 && a.output == "table" {
			a.note("no quota granted%s; best-effort jobs need none. An admin grants quota with `corral quota set USER BAND --cpu N --memory SIZE`", forWhom(user))
		}
		return a.show(t, protoList(l.Quotas))
	}
	var rf resourceFlags
	var ports int32
	set := &cobra.Command{
		Use:     "set USER BAND",
		Short:   "grant a user quota in a band (admins only)",
		Example: "  corral quota set alice production --cpu 8 --memory 32GiB",
		Args:    args(2, 2, "USER and BAND (monitoring, production, batch)"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if _, ok := projections.ParseBand(argv[1]); !ok {
				return usageErr("band %q: want monitoring, production, batch or best-effort", argv[1])
			}
			res, err := rf.resources(ports)
			if err != nil {
				return err
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return c.SetQuota(ctx, &apipb.SetQuotaRequest{RequestId: id, User: argv[0], Band: argv[1], Resources: res}, o...)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "quota of %s in %s set to %s: %s\n", argv[0], argv[1], resourcesText(res), rep.Message)
			return nil
		},
	}
	rf.add(set, "granted")
	set.Flags().Int32Var(&ports, "ports", 0, "granted ports")
	c.AddCommand(get, set)
	return c
}

func (a *app) allocCommand() *cobra.Command {
	c := &cobra.Command{Use: "alloc", Short: "remove alloc sets (create them with a bundle: see examples/alloc.jsonnet)"}
	var owner string
	rm := &cobra.Command{
		Use:   "remove NAME",
		Short: "remove an alloc set; the jobs running in it must be killed first",
		Args:  args(1, 1, "one alloc set name"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			rep, err := cl.mutate(cmd.Context(), func(ctx context.Context, c apipb.CellClient, id string, o ...grpc.CallOption) (*apipb.MutationReply, error) {
				return c.RemoveAllocSet(ctx, &apipb.JobRequest{RequestId: id, User: owner, Job: argv[0]}, o...)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "alloc set %s: %s\n", argv[0], rep.Message)
			return nil
		},
	}
	rm.Flags().StringVar(&owner, "owner", "", "the alloc set's owner (default you)")
	c.AddCommand(rm)
	return c
}

func (a *app) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "show the master answering, who leads, and the cell in numbers",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			s, err := readValue(cmd.Context(), cl, apipb.CellClient.Status, &apipb.StatusRequest{})
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(nil, s)
			}
			w := a.stdout()
			role := "follower"
			if s.Leader {
				role = "leader"
			}
			fmt.Fprintf(w, "master:    %s at %s (%s, epoch %d)\n", s.Master, cl.Current(), role, s.Epoch)
			fmt.Fprintf(w, "leader:    %s at %s\n", orDash(s.LeaderName), orDash(s.LeaderAddress))
			fmt.Fprintf(w, "log:       position %d applied of %d (%s)\n", s.Position, s.Head, s.Store)
			fmt.Fprintf(w, "machines:  %d\n", s.Machines)
			fmt.Fprintf(w, "jobs:      %d\n", s.Jobs)
			fmt.Fprintf(w, "tasks:     %d running, %d pending\n", s.TasksRunning, s.TasksPending)
			return nil
		},
	}
}

func (a *app) eventsCommand() *cobra.Command {
	var since, job, typ, owner, stream string
	var follow bool
	var limit int
	c := &cobra.Command{
		Use:   "events",
		Short: "print the cell's log of events, filtered, or follow it",
		Example: `  corral events --job hello
  corral events --since 10m --type TaskFailed
  corral events --follow`,
		Args: args(0, 0, "no arguments (filter with flags)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &apipb.EventsRequest{Job: job, Type: typ, User: owner, StreamPrefix: stream}
			if since != "" {
				pos, t, err := parsePoint(since, time.Now())
				if err != nil {
					return usageErr("--since: %v", err)
				}
				req.FromPosition, req.SinceUs = pos, t.UnixMicro()
				if pos > 0 {
					req.SinceUs = 0
				}
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := cmd.Context()
			w := a.stdout()
			var all []*apipb.EventView
			printed := 0
			emit := func(evs []*apipb.EventView) error {
				for _, e := range evs {
					if limit > 0 && printed >= limit {
						return nil
					}
					printed++
					switch a.output {
					case "json", "yaml":
						if follow {
							js, err := jsonOf(e)
							if err != nil {
								return err
							}
							fmt.Fprintln(w, string(js))
						} else {
							all = append(all, e)
						}
					case "csv":
						if printed == 1 {
							fmt.Fprintln(w, "position,time,type,stream,actor,summary")
						}
						writeCSVLine(w, strconv.FormatInt(e.Position, 10), time.UnixMicro(e.OccurredAtUs).UTC().Format(time.RFC3339Nano), e.Type, e.Stream, e.Actor, e.Summary)
					default:
						fmt.Fprintf(w, "%7d  %s  %-20s %s\n", e.Position, time.UnixMicro(e.OccurredAtUs).Local().Format("2006-01-02 15:04:05.000"), e.Type, e.Summary)
					}
				}
				return nil
			}
			if a.output == "table" && !follow {
				fmt.Fprintf(w, "%7s  %-23s  %-20s %s\n", "POS", "TIME", "TYPE", "SUMMARY")
			}
			if follow {
				if a.output == "table" {
					fmt.Fprintf(w, "%7s  %-23s  %-20s %s\n", "POS", "TIME", "TYPE", "SUMMARY")
				}
				stream, err := cl.watch(ctx, req)
				if err != nil {
					return err
				}
				for {
					e, err := stream.Recv()
					if err != nil {
						if ctx.Err() != nil || err == io.EOF {
							return nil
						}
						return err
					}
					if err := emit([]*apipb.EventView{e}); err != nil {
						return err
					}
					if limit > 0 && printed >= limit {
						return nil
					}
				}
			}
			for {
				l, err := readValue(ctx, cl, apipb.CellClient.Events, req)
				if err != nil {
					return err
				}
				if err := emit(l.Events); err != nil {
					return err
				}
				if l.NextPosition > l.Head || len(l.Events) == 0 && l.NextPosition <= req.FromPosition || (limit > 0 && printed >= limit) {
					break
				}
				req.FromPosition, req.SinceUs = l.NextPosition, 0
			}
			if a.output == "json" || a.output == "yaml" {
				return a.show(nil, protoList(all))
			}
			if printed == 0 && a.output == "table" {
				a.note("no events match")
			}
			return nil
		},
	}
	c.Flags().StringVar(&since, "since", "", "start at this position, or time (RFC 3339, 5m for five minutes ago, today)")
	c.Flags().StringVar(&job, "job", "", "only events of this job and its tasks")
	c.Flags().StringVar(&owner, "owner", "", "only events of this user's jobs (with --job: the job's owner)")
	c.Flags().StringVar(&typ, "type", "", "only events of this type, e.g. TaskFailed")
	c.Flags().StringVar(&stream, "stream", "", "only events whose stream starts with this, e.g. machine/m1")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events as they are appended")
	c.Flags().IntVarP(&limit, "limit", "n", 0, "print at most this many events")
	return c
}

func writeCSVLine(w io.Writer, cells ...string) {
	for i, c := range cells {
		if strings.ContainsAny(c, ",\"\n") {
			c = `"` + strings.ReplaceAll(c, `"`, `""`) + `"`
		}
		if i > 0 {
			fmt.Fprint(w, ",")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprintln(w)
}

func (a *app) stateCommand() *cobra.Command {
	var at, owner string
	c := &cobra.Command{
		Use:   "state --at TIME|POSITION",
		Short: "show the cell as it was at a past time or log position",
		Example: `  corral state --at 5m        # five minutes ago
  corral state --at 2025-06-01T12:00:00Z
  corral state --at 1200      # after the log's event 1200`,
		Args: args(0, 0, "no arguments (give --at)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if at == "" {
				return usageErr("--at: give a time (5m for five minutes ago, RFC 3339) or a log position")
			}
			pos, t, err := parsePoint(at, time.Now())
			if err != nil {
				return usageErr("--at: %v", err)
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			req := &apipb.StateAtRequest{Position: pos, User: owner}
			if pos == 0 {
				req.TimeUs = t.UnixMicro()
			}
			v, err := readValue(cmd.Context(), cl, apipb.CellClient.StateAt, req)
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.show(nil, v)
			}
			w := a.stdout()
			asked := at
			if pos == 0 {
				asked = t.Local().Format("2006-01-02 15:04:05")
			}
			if v.Position == 0 {
				fmt.Fprintf(w, "the cell at %s: before its first event; nothing had happened yet\n", asked)
				return nil
			}
			fmt.Fprintf(w, "the cell at %s: log position %d (last event at %s)\n", asked, v.Position, timeText(v.TimeUs))
			fmt.Fprintf(w, "%s, %s; tasks: %d pending, %d running, %d dead\n\n", plural(len(v.Machines), "machine"), plural(len(v.Jobs), "job"), v.TasksPending, v.TasksRunning, v.TasksDead)
			if len(v.Machines) > 0 {
				if err := writeTable(w, machinesTable(v.Machines), "table"); err != nil {
					return err
				}
				fmt.Fprintln(w)
			}
			jt := &table{cols: []string{"JOB", "STATE", "PRIORITY", "RUNNING", "PENDING", "DEAD", "TASKS"}}
			for _, j := range v.Jobs {
				jt.add(j.Spec.GetUser()+"/"+j.Spec.GetName(), j.State, strconv.Itoa(int(j.Spec.GetPriority())), strconv.Itoa(int(j.Running+j.Scheduled)),
					strconv.Itoa(int(j.Pending)), strconv.Itoa(int(j.Dead)), strconv.Itoa(int(j.TotalTasks)))
			}
			if len(v.Jobs) == 0 {
				fmt.Fprintln(w, "no jobs then")
				return nil
			}
			return writeTable(w, jt, "table")
		},
	}
	c.Flags().StringVar(&at, "at", "", "a time (RFC 3339; 5m or -5m for five minutes ago; today) or a log position")
	c.Flags().StringVar(&owner, "owner", "", "show only this user's jobs")
	c.AddCommand(a.stateDiffCommand())
	return c
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// readMachine reads one machine's view at or after position minPos.
func (a *app) readMachine(ctx context.Context, cl *client, name string, minPos int64) (*apipb.MachineView, error) {
	l, err := readValue(ctx, cl, apipb.CellClient.ListMachines, &apipb.ListMachinesRequest{Read: &apipb.ReadOptions{MinPosition: minPos}})
	if err != nil {
		return nil, err
	}
	for _, m := range l.Machines {
		if m.Name == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("machine %s: not registered", name)
}

// waitDrained shows a drain's progress, a line each time it changes (tasks
// left, the jobs whose disruption budgets hold them), until the machine
// holds no task; it fails when the machine stops draining or after
// timeout.
func (a *app) waitDrained(ctx context.Context, cl *client, name string, minPos int64, timeout time.Duration) error {
	start := time.Now()
	last := ""
	for {
		v, err := a.readMachine(ctx, cl, name, minPos)
		if err != nil {
			return err
		}
		elapsed := time.Since(start).Truncate(100 * time.Millisecond)
		if !v.Draining {
			fmt.Fprintf(a.stdout(), "machine %s: no longer draining, %d tasks left (%s)\n", name, v.Tasks, elapsed)
			return &silentErr{code: ExitFailed}
		}
		if v.Tasks == 0 {
			fmt.Fprintf(a.stdout(), "machine %s: drained, no task left (%s)\n", name, elapsed)
			return nil
		}
		line := fmt.Sprintf("machine %s: draining, %d tasks left", name, v.Tasks)
		if len(v.DrainHolds) > 0 {
			line += "; held by " + strings.Join(v.DrainHolds, "; ")
		} else {
			line += "; being replaced"
		}
		if line != last {
			fmt.Fprintf(a.stderr(), "%s (%s)\n", line, elapsed)
			last = line
		}
		if time.Since(start) > timeout {
			fmt.Fprintf(a.stdout(), "timed out after %s: %s\n", elapsed, line)
			return &silentErr{code: ExitFailed}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
