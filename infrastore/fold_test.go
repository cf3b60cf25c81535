package infrastore

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/golden"
	"github.com/corralhq/corral/internal/history"
	"github.com/corralhq/corral/projections"
)

// readGolden reads one of the projections' golden histories.
func readGolden(t *testing.T, g history.Golden) []events.Event {
	t.Helper()
	evs, err := golden.ReadFile(g.Path(filepath.Join("..", "projections", "testdata", "histories")))
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestCurrentTablesAreTheFold: over every golden history, ingested in
// batches of seeded sizes, with the ingester's fold dropped and recovered
// from the file (its checkpoint, then the events table) now and then,
// every column of jobs, tasks, machines and allocs is the projection's
// fold of the log at the same position; the columns the log's events give
// (event_type, submit_time, submit_position, time, position) agree with
// those events' rows.
func TestCurrentTablesAreTheFold(t *testing.T) {
	defer func(n int64) { checkpointEvery = n }(checkpointEvery)
	checkpointEvery = 700
	ctx := context.Background()
	goldens := history.Goldens
	if testing.Short() {
		goldens = goldens[:2] // -short: two histories of the eight
	}
	for _, g := range goldens {
		t.Run(g.Name(), func(t *testing.T) {
			evs := readGolden(t, g)
			s := openStore(t, Options{})
			st := projections.New()
			rng := rand.New(rand.NewPCG(g.Seed, 7))
			compared, reused, reloads := 0, 0, 0
			for i := 0; i < len(evs); {
				chunk := evs[i:min(i+1+rng.IntN(300), len(evs))]
				i += len(chunk)
				for _, e := range chunk {
					if p, ok := e.Data.(*events.JobSubmitted); ok && st.Job(p.Spec.GetUser(), p.Spec.GetName()) != nil {
						reused++
					}
					if err := projections.Apply(st, e); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Apply(ctx, chunk); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(8) == 0 || i == len(evs) {
					compared += compareWithFold(t, s, st)
				}
				if rng.IntN(5) == 0 {
					s.m = nil // the next batch recovers the fold from the file
					reloads++
				}
			}
			if compared < 100 || reused == 0 || reloads == 0 || st.Skipped != 0 {
				t.Fatalf("%d rows compared, %d names used again, %d reloads, %d events skipped by the fold: not a test", compared, reused, reloads, st.Skipped)
			}
		})
	}
}

// compareWithFold checks the current-state tables against st and returns
// how many rows it compared.
func compareWithFold(t *testing.T, s *Infrastore, st *projections.State) int {
	t.Helper()
	var jobs, tasks, machines, allocs []string
	for _, j := range st.SortedJobs() {
		sp := j.Spec()
		r := sp.GetResources()
		status := map[projections.JobEnd]string{projections.NotEnded: "running", projections.JobKilledEnd: "killed", projections.JobFinishedEnd: "finished"}[j.End]
		jobs = append(jobs, fmt.Sprintf("%s,%s,%d,%d,%s,%d,%d,%d,%d,%s,%s,%d,%s,%s",
			j.User, j.Name, j.Current, sp.GetPriority(), events.BandOf(sp.GetPriority()), sp.GetTaskCount(),
			r.GetCpuMilli(), r.GetMemoryBytes(), r.GetDiskBytes(), pairs(sp.GetLabels()), status, j.SubmittedUS,
			orNull(j.EndedUS != 0, fmt.Sprint(j.EndedUS)), orNull(j.EndReason != "", j.EndReason)))
		for _, tk := range j.Tasks {
			if tk == nil {
				continue
			}
			state := tk.End.String()
			switch tk.State {
			case projections.TaskPending:
				state = "pending"
			case projections.TaskScheduled, projections.TaskRunning:
				state = "running"
			}
			l, res := tk.Limit, tk.Reservation
			tasks = append(tasks, fmt.Sprintf("%s,%s,%d,%s,%s,%d,%d,%s,%d,%d,%d,%d,%d,%d,%t,%d,%s,%s,%s,%s,%s",
				j.User, j.Name, tk.Index, state, orNull(tk.Machine != "", tk.Machine), tk.SpecVersion,
				tk.Priority(), events.BandOf(tk.Priority()), l.CPUMilli, l.MemoryBytes, l.DiskBytes,
				res.CPUMilli, res.MemoryBytes, res.DiskBytes, res != l, tk.Restarts,
				orNull(tk.Pid != 0, fmt.Sprint(tk.Pid)), orNull(tk.StartedUS != 0, fmt.Sprint(tk.StartedUS)),
				orNull(tk.Health != projections.HealthUnknown, tk.Health.String()), orNull(tk.HealthMessage != "", tk.HealthMessage),
				orNull(tk.HealthyUS != 0, fmt.Sprint(tk.HealthyUS))))
		}
	}
	for _, m := range st.SortedMachines() {
		c := m.Capacity
		machines = append(machines, fmt.Sprintf("%s,%s,%d,%d,%d,%d,%d,%s,%s,%t,%s",
			m.Name, orNull(m.Address != "", m.Address), c.CPUMilli, c.MemoryBytes, c.DiskBytes, c.Ports, c.GPUMilli,
			pairs(m.Attributes), m.State, m.Draining, orNull(m.Reason != "", m.Reason)))
	}
	for _, k := range slices.SortedFunc(maps.Keys(st.AllocSets), func(a, b projections.JobKey) int { return strings.Compare(a.String(), b.String()) }) {
		set := st.AllocSets[k]
		for _, a := range set.Allocs {
			allocs = append(allocs, fmt.Sprintf("%s,%s,%d,%s,%d,%d,%d,%d,%d",
				set.User, set.Name, a.Index, orNull(a.Machine != "", a.Machine), set.Priority,
				set.Resources.CPUMilli, set.Resources.MemoryBytes, a.Used.CPUMilli, a.Used.MemoryBytes))
		}
	}
	pairsSQL := func(c string) string {
		return "coalesce(array_to_string(list_sort(list_transform(map_entries(" + c + "), x -> x.key || '=' || x.value)), ';'), '')"
	}
	checkRows(t, s, `SELECT user, job, spec_version, priority, band, task_count, cpu_milli, memory_bytes, disk_bytes, `+pairsSQL("labels")+`,
		status, submit_time, end_time, end_reason FROM jobs ORDER BY user, job`, jobs...)
	checkRows(t, s, `SELECT user, job, task_index, state, machine, spec_version, priority, band,
		cpu_limit_milli, memory_limit_bytes, disk_limit_bytes, cpu_reservation_milli, memory_reservation_bytes, disk_reservation_bytes,
		reservation_estimated, restarts, pid, start_time, health, health_message, healthy_since
		FROM tasks ORDER BY user, job, task_index`, tasks...)
	checkRows(t, s, `SELECT machine, address, cpu_milli, memory_bytes, disk_bytes, ports, gpu_milli, `+pairsSQL("attributes")+`,
		state, draining, reason FROM machines ORDER BY machine`, machines...)
	checkRows(t, s, `SELECT user, name, alloc_index, machine, priority, cpu_milli, memory_bytes, used_cpu_milli, used_memory_bytes
		FROM allocs ORDER BY user, name, alloc_index`, allocs...)
	// The columns of the log's events: a task's last trace code and
	// submission are those of its job's (the current one's) task_events,
	// a job's submission its last JobSubmitted; no row is older than the
	// last event naming it.
	checkRows(t, s, `WITH e AS (
			SELECT user, job, task_index, arg_max(event_type, position) AS code,
				max(time) FILTER (WHERE event_type = 0) AS submitted, max(position) AS last
			FROM task_events t WHERE position >= (SELECT submit_position FROM jobs j WHERE j.user = t.user AND j.job = t.job)
			GROUP BY ALL)
		SELECT count(*) FROM tasks t LEFT JOIN e USING (user, job, task_index)
		WHERE t.event_type IS DISTINCT FROM e.code OR t.submit_time IS DISTINCT FROM e.submitted OR t.position < e.last
			OR t.time <> (SELECT epoch_us(time) FROM events WHERE position = t.position)`, "0")
	checkRows(t, s, `SELECT count(*) FROM jobs j WHERE submit_position IS DISTINCT FROM (
			SELECT max(position) FROM events e WHERE type = 'JobSubmitted'
				AND (payload->>'$.spec.user') = j.user AND (payload->>'$.spec.name') = j.job)`, "0")
	return len(jobs) + len(tasks) + len(machines) + len(allocs)
}

// pairs renders a map as the tests' SQL does: k=v, sorted, joined by ';'.
func pairs(m map[string]string) string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, ";")
}

func orNull(ok bool, s string) string {
	if !ok {
		return "NULL"
	}
	return s
}

// TestAsOfMacrosAreTheGoldenFold: at moments through every golden history,
// tasks_at, jobs_at and machines_at give what the projection's fold of the
// log up to that moment holds (jobs whose names were used again included).
func TestAsOfMacrosAreTheGoldenFold(t *testing.T) {
	ctx := context.Background()
	for _, g := range history.Goldens {
		t.Run(g.Name(), func(t *testing.T) {
			evs := readGolden(t, g)
			s := openStore(t, Options{})
			if err := s.Apply(ctx, evs); err != nil {
				t.Fatal(err)
			}
			st := projections.New()
			next, compared := 0, 0
			for _, frac := range []float64{0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 1} {
				at := evs[int(frac*float64(len(evs)))-1].OccurredAt
				for next < len(evs) && !evs[next].OccurredAt.After(at) {
					if err := projections.Apply(st, evs[next]); err != nil {
						t.Fatal(err)
					}
					next++
				}
				ts := "'" + at.UTC().Format("2006-01-02 15:04:05.999999") + "'"
				var tasks, jobs, machines []string
				for _, j := range st.SortedJobs() {
					if !j.Dead() {
						sp := j.Spec()
						r := sp.GetResources()
						jobs = append(jobs, fmt.Sprintf("%s,%s,%d,%d,%d,%d,%d,%d,%s",
							j.User, j.Name, j.Current, sp.GetPriority(), sp.GetTaskCount(), r.GetCpuMilli(), r.GetMemoryBytes(), j.SubmittedUS, pairs(sp.GetLabels())))
					}
					for _, tk := range j.Tasks {
						if tk == nil || tk.State == projections.TaskDead {
							continue
						}
						state, machine := "running", tk.Machine
						if tk.State == projections.TaskPending {
							state, machine = "pending", "NULL"
						}
						tasks = append(tasks, fmt.Sprintf("%s,%s,%d,%s,%s,%d,%d,%g,%g",
							j.User, j.Name, tk.Index, state, machine, tk.SpecVersion, tk.Priority(),
							float64(tk.Limit.CPUMilli)/1000, float64(tk.Limit.MemoryBytes)))
					}
				}
				for _, m := range st.SortedMachines() {
					machines = append(machines, fmt.Sprintf("%s,%s,%t,%d,%d,%s", m.Name, m.State, m.Draining, m.Capacity.CPUMilli, m.Capacity.MemoryBytes, pairs(m.Attributes)))
				}
				checkRows(t, s, `SELECT user, job, task_index, state, machine, spec_version, priority, cpu_request, memory_request
					FROM tasks_at(`+ts+`) ORDER BY user, job, task_index`, tasks...)
				checkRows(t, s, `SELECT user, job, spec_version, priority, task_count, cpu_milli, memory_bytes, submit_time,
					coalesce(array_to_string(list_sort(list_transform(map_entries(labels), x -> x.key || '=' || x.value)), ';'), '')
					FROM jobs_at(`+ts+`) ORDER BY user, job`, jobs...)
				checkRows(t, s, `SELECT machine, state, draining, cpu_milli, memory_bytes,
					coalesce(array_to_string(list_sort(list_transform(map_entries(attributes), x -> x.key || '=' || x.value)), ';'), '')
					FROM machines_at(`+ts+`) ORDER BY machine`, machines...)
				compared += len(tasks) + len(jobs) + len(machines)
			}
			if compared < 100 {
				t.Fatalf("%d rows compared: not a test", compared)
			}
		})
	}
}
