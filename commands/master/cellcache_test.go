package master

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/commandtest"
	"github.com/corralhq/corral/internal/history"
	"github.com/corralhq/corral/projections"
	"github.com/corralhq/corral/scheduler"
)

// The machines a pass reuses from the last one are the machines a fresh
// build makes: at every step of random histories (placements, failures,
// evictions, drains, machines down and removed, updates), the cell built
// with the core's cache equals the cell built from nothing, and the
// scheduler that remembers machines plans what a fresh one plans.
func TestCachedCellIsTheFreshCell(t *testing.T) {
	remembered := 0
	for seed := uint64(1); seed <= 4; seed++ {
		h := history.New(history.Config{Machines: 20, Users: 3, JobNames: 8, MaxTasks: 8, MaxPending: 60}, seed)
		var cache CellCache
		remembering, fresh := scheduler.New(scheduler.DefaultConfig()), scheduler.New(scheduler.DefaultConfig())
		remembering.RememberMachines()
		for step := 0; step < 3000; step++ {
			h.Step()
			now := h.Now.Add(time.Second)
			limiter := func() *scheduler.RescheduleLimiter { return scheduler.NewRescheduleLimiter(1e9, 1e9, 0.5) }
			cached := buildCell(h.S, now, 5*time.Minute, limiter(), &cache)
			want := BuildCell(h.S, now, 5*time.Minute, limiter())
			if !reflect.DeepEqual(cached, want) {
				t.Fatalf("seed %d step %d (position %d): the cached cell differs from a fresh build", seed, step, h.S.Position)
			}
			// Every step: the remembering scheduler's verdicts from one
			// pass must hold in the next.
			a, b := remembering.Schedule(cached, uint64(h.S.Position)), fresh.Schedule(want, uint64(h.S.Position))
			remembered += a.Stats.InfeasibleRemembered
			a.Stats, b.Stats = scheduler.Stats{}, scheduler.Stats{}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d step %d: the remembering scheduler planned otherwise", seed, step)
			}
		}
	}
	if remembered == 0 {
		t.Fatal("no pass skipped a machine known infeasible: the memory is not exercised")
	}
	t.Logf("%d checks skipped as known infeasible", remembered)
}

// The cache's order is the machines by name, also when one machine left
// and another came between two passes (the same count, another set).
func TestCachedOrderFollowsTheMachineSet(t *testing.T) {
	s := projections.New()
	var cache CellCache
	do := func(cmd commands.Command) { commandtest.Do(t, s, cmd, time.Unix(1, 0)) }
	admin := commands.Meta{Actor: commands.Actor{User: "root", Admin: true}}
	register := func(name string) {
		do(commands.RegisterMachine{Meta: admin, Machine: name, Address: name + ":1", Capacity: projections.Resources{CPUMilli: 1000, MemoryBytes: 1 << 30}})
	}
	names := func() []string {
		var out []string
		for _, m := range cache.sorted(s) {
			out = append(out, m.Name)
		}
		return out
	}
	for _, n := range []string{"c", "a", "b"} {
		register(n)
	}
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("first pass: %v", got)
	}
	do(commands.RemoveMachine{Meta: admin, Machine: "b", Reason: "retired"})
	register("d")
	if got := names(); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Fatalf("after b left and d came: %v", got)
	}
	register("0")
	if got := names(); !slices.Equal(got, []string{"0", "a", "c", "d"}) {
		t.Fatalf("after 0 came: %v", got)
	}
}
