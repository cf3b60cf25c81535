package infrastore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// The state-at-time macros answer what the projection holds: at times
// through a random history, quotas_at, tasks_at and machines_at give the
// quotas, the live tasks (state and machine) and the machines the log
// folded to that time holds; prices_at and allocs_at the sheet in force
// and the allocs with their machines.
func TestAsOfMacrosAreTheFold(t *testing.T) {
	evs := withPriceSheets(cellHistory(11, 3000))
	s := openStore(t, Options{})
	if _, err := s.CatchUp(context.Background(), newSQLiteLog(t, evs)); err != nil {
		t.Fatal(err)
	}
	st := projections.New()
	next := 0
	checked, sheets, allocsSeen := 0, 0, 0
	for _, frac := range []float64{0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1} {
		i := int(frac*float64(len(evs))) - 1
		at := evs[i].OccurredAt
		for next < len(evs) && !evs[next].OccurredAt.After(at) {
			if err := projections.Apply(st, evs[next]); err != nil {
				t.Fatal(err)
			}
			next++
		}
		ts := "'" + at.UTC().Format("2006-01-02 15:04:05.999999") + "'"
		checkRows(t, s, `SELECT user, band, cpu_milli, memory_bytes FROM quotas_at(`+ts+`) ORDER BY ALL`, quotasAsOf(st)...)
		tasks := liveTasksAsOf(st)
		checkRows(t, s, `SELECT user, job, task_index, state, machine FROM tasks_at(`+ts+`) ORDER BY ALL`, tasks...)
		checkRows(t, s, `SELECT machine, state FROM machines_at(`+ts+`) ORDER BY ALL`, machinesAsOf(st)...)
		if sheet, ok := st.SheetAt(at.UnixMicro()); ok {
			var bands []string
			for band, p := range sheet.Sheet.Bands {
				bands = append(bands, fmt.Sprintf("%s,%s,%s", band, sheet.Sheet.Currency, p.GetBasis()))
			}
			slices.Sort(bands)
			checkRows(t, s, `SELECT band, currency, basis FROM prices_at(`+ts+`) ORDER BY ALL`, bands...)
			sheets++
		} else {
			checkRows(t, s, `SELECT count(*) FROM prices_at(`+ts+`)`, "0")
		}
		allocs := allocsAsOf(st)
		checkRows(t, s, `SELECT user, name, alloc_index, machine FROM allocs_at(`+ts+`) ORDER BY ALL`, allocs...)
		allocsSeen += len(allocs)
		checked += len(tasks)
	}
	if checked < 50 || sheets == 0 || allocsSeen == 0 {
		t.Fatalf("%d live tasks, %d price sheets and %d allocs compared: not a test", checked, sheets, allocsSeen)
	}
}

// withPriceSheets adds two price sheets to evs: one in force from when it
// is set, one set for later.
func withPriceSheets(evs []events.Event) []events.Event {
	sheet := func(i int, effective time.Time, cpu string) {
		e := events.New(events.BillingStream, evs[i].OccurredAt, &events.PriceSheetSet{Currency: "USD", EffectiveUs: effective.UnixMicro(),
			Bands: map[string]*events.Prices{"batch": {Basis: "reservation", CpuCoreHour: cpu}, "production": {Basis: "limit", CpuCoreHour: cpu}}})
		e.Actor = "root"
		evs = slices.Insert(evs, i+1, e)
	}
	sheet(600, evs[600].OccurredAt, "0.03")
	sheet(1500, evs[2500].OccurredAt, "0.05")
	for i := range evs {
		evs[i].Position = int64(i + 1)
	}
	return evs
}

// quotasAsOf are st's quotas as quotas_at's rows, sorted.
func quotasAsOf(st *projections.State) []string {
	var quotas []string
	for ub, r := range st.Quotas {
		quotas = append(quotas, fmt.Sprintf("%s,%s,%d,%d", ub.User, ub.Band, r.CPUMilli, r.MemoryBytes))
	}
	slices.Sort(quotas)
	return quotas
}

// liveTasksAsOf are st's pending and placed tasks as tasks_at's rows,
// sorted.
func liveTasksAsOf(st *projections.State) []string {
	var tasks []string
	for _, j := range st.Jobs {
		for _, tk := range j.Tasks {
			if tk == nil {
				continue
			}
			switch tk.State {
			case projections.TaskPending:
				tasks = append(tasks, fmt.Sprintf("%s,%s,%d,pending,NULL", j.User, j.Name, tk.Index))
			case projections.TaskScheduled, projections.TaskRunning:
				tasks = append(tasks, fmt.Sprintf("%s,%s,%d,running,%s", j.User, j.Name, tk.Index, tk.Machine))
			}
		}
	}
	slices.Sort(tasks)
	return tasks
}

// machinesAsOf are st's machines as machines_at's rows, sorted.
func machinesAsOf(st *projections.State) []string {
	var machines []string
	for name, m := range st.Machines {
		state := "up"
		if m.State == projections.MachineDown {
			state = "down"
		}
		machines = append(machines, name+","+state)
	}
	slices.Sort(machines)
	return machines
}

// allocsAsOf are st's allocs as allocs_at's rows, sorted.
func allocsAsOf(st *projections.State) []string {
	var allocs []string
	for _, set := range st.AllocSets {
		for _, a := range set.Allocs {
			m := a.Machine
			if m == "" {
				m = "NULL"
			}
			allocs = append(allocs, fmt.Sprintf("%s,%s,%d,%s", set.User, set.Name, a.Index, m))
		}
	}
	slices.Sort(allocs)
	return allocs
}

func TestStateDiffAndQuotasInSQL(t *testing.T) {
	s := ingestScenario(t)
	ts := func(d time.Duration) string { return "'" + at(d).Format("2006-01-02 15:04:05") + "'" }
	checkRows(t, s, `SELECT kind, name, change, before, after FROM state_diff(`+ts(90*time.Second)+`, `+ts(30*time.Minute)+`) ORDER BY ALL`,
		"task,alice/web/0,started,pending,running on m1",
		"task,alice/web/1,started,pending,running on m2",
	)
	checkRows(t, s, `SELECT kind, name, change FROM state_diff(`+ts(30*time.Minute)+`, `+ts(9*time.Hour)+`) ORDER BY ALL`,
		"job,alice/web,ended",
		"machine,m1,now down",
		"machine,m2,removed",
		"task,alice/web/0,ended",
		"task,alice/web/1,ended",
	)
	checkRows(t, s, `SELECT count(*) FROM state_diff(`+ts(time.Hour)+`, `+ts(time.Hour)+`)`, "0")
}
