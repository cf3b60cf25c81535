package fauxmaster

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// syntheticWeek is a recording of a cell that never ran, at the rates of
// the public Google trace (clusterdata-2011: about 670,000 jobs and 25
// million tasks on 12,500 machines in 29 days, so per 1,000 machines and
// week some 13,000 jobs of 38 tasks on average): machines registered at
// its start, jobs submitted through the window, one in twenty a service
// that runs on, the others batch jobs whose tasks run a log-normal time
// (median 2 h, mean about 4.7 h) and finish by their own doing. The replay
// places everything with its own passes: the cost measured is the
// replay's (the commands, the passes, the fold).
func syntheticWeek(machines int, span time.Duration, seed uint64) *Recording {
	rng := rand.New(rand.NewPCG(seed, 0x7765656b))
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	st := projections.New()
	st.TimeUS = start.UnixMicro()
	rec := &Recording{Start: st, StartTime: start, EndTime: start.Add(span),
		runs: map[taskID][]*recordedRun{}, initial: map[taskID]bool{}, NotReplayed: map[string]int{}}
	admin := commands.Meta{Actor: commands.Actor{User: "admin", Admin: true}}
	us := start.UnixMicro()
	for i := range machines {
		name := fmt.Sprintf("m%04d", i)
		rec.machines = append(rec.machines, name)
		rec.inputs = append(rec.inputs, input{atUS: us, machine: name, cmd: commands.RegisterMachine{Meta: admin, Machine: name,
			Address: name + ":7070", Capacity: projections.Resources{CPUMilli: 32000, MemoryBytes: 128 << 30, DiskBytes: 1 << 40, Ports: 1000}}})
	}
	users := []string{"ads", "search", "maps", "mail", "video", "infra"}
	for _, u := range users {
		for _, band := range []string{"production", "batch"} {
			rec.inputs = append(rec.inputs, input{atUS: us, cmd: commands.SetQuota{Meta: admin, User: u, Band: band,
				Resources: projections.Resources{CPUMilli: int64(machines) * 32000, MemoryBytes: int64(machines) << 37, DiskBytes: 1 << 50, Ports: 1 << 20}}})
		}
	}
	jobGap := (7 * 24 * time.Hour).Seconds() / 13 / float64(machines) // 13 jobs per machine and week
	end := rec.EndTime.UnixMicro()
	n := 0
	for t := us + 1; ; {
		t += int64(rng.ExpFloat64() * jobGap * 1e6)
		if t >= end {
			break
		}
		n++
		u := users[rng.IntN(len(users))]
		service := rng.IntN(20) == 0
		tasks := int32(min(1+math.Exp(rng.NormFloat64()*1.2+2.9), 2000)) // mean about 38
		prio := int32(2 + rng.IntN(7))
		if service {
			prio, tasks = 9, int32(1+rng.IntN(15))
		}
		spec := &events.JobSpec{Name: fmt.Sprintf("j%d", n), User: u, Priority: prio, TaskCount: tasks, Command: "/bin/app",
			Resources: &events.Resources{CpuMilli: int64(250 + rng.IntN(2000)), MemoryBytes: int64(1+rng.IntN(8)) << 30}}
		rec.inputs = append(rec.inputs, input{atUS: t, job: projections.JobKey{User: u, Name: spec.Name}, inc: 1,
			cmd: commands.SubmitJob{Meta: commands.Meta{Actor: commands.Actor{User: u}}, Spec: spec}})
		if service {
			continue
		}
		for i := range tasks {
			d := int64(math.Exp(rng.NormFloat64()*1.3) * 2 * 3600e6)
			id := taskID{projections.TaskKey{User: u, Job: spec.Name, Index: i}, 1}
			rec.runs[id] = []*recordedRun{{scheduledUS: 1, startedUS: 1, endedUS: 1 + d, end: runFinished}}
		}
	}
	rec.startDelay = 2 * time.Second
	rec.Recorded = newObserver(st).finish(end)
	rec.Events = len(rec.inputs)
	return rec
}

// BenchmarkReplayWeek replays a week of a 1,000-machine cell
// (CORRAL_SIM_MACHINES, CORRAL_SIM_DAYS change the size) and reports
// simulated seconds per wall second.
func BenchmarkReplayWeek(b *testing.B) {
	machines, days := 1000, 7.0
	if v, err := strconv.Atoi(os.Getenv("CORRAL_SIM_MACHINES")); err == nil && v > 0 {
		machines = v
	}
	if v, err := strconv.ParseFloat(os.Getenv("CORRAL_SIM_DAYS"), 64); err == nil && v > 0 {
		days = v
	}
	span := time.Duration(days * 24 * float64(time.Hour))
	rec := syntheticWeek(machines, span, 1)
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // as corral sim runs it
	b.ResetTimer()
	var rep *Report
	for b.Loop() {
		var err error
		if rep, err = Run(rec, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(span.Seconds()*float64(b.N)/b.Elapsed().Seconds(), "sim-s/s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/replay")
	b.ReportMetric(float64(rep.Simulated.Placed), "placed")
	b.ReportMetric(float64(rep.Commands), "commands")
	b.ReportMetric(float64(rep.Passes), "passes")
	b.ReportMetric(100*rep.Simulated.CPU, "cpu-%")
}
