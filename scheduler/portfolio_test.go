package scheduler

import (
	"fmt"
	"testing"
)

// An alternative rule's plan is kept only when it leaves fewer tasks
// pending at the highest priority where the plans differ: on random cells
// sampled at K=2 under the default rule (GPUs contested on a quarter),
// the plan with the alternatives never leaves more pending than the plan
// without them at that priority, it still applies in its order, the same
// seed gives the same plan, and a plan no alternative won is the plan
// without them. Relocation is off: its budget counts every run's checks.
func TestAlternativeRulesKeepOnlyAFullerPlan(t *testing.T) {
	noRelocation = true
	defer func() { noRelocation = false }()
	kept := 0
	for seed := uint64(1); seed <= 400; seed++ {
		cell := propertyCell(seed, 29)
		cfg := DefaultConfig()
		cfg.FeasibleK = 2
		with := Schedule(cell, cfg, seed)
		noPortfolio = true
		without := Schedule(cell, cfg, seed)
		noPortfolio = false
		if again := Schedule(cell, cfg, seed); fmt.Sprint(again.Placements) != fmt.Sprint(with.Placements) {
			t.Fatalf("seed %d: two plans from one input and seed", seed)
		}
		alternative := with.Stats.RerunKept >= firstAlternativeRun && with.Stats.RerunKept < wholeViewRun
		if alternative {
			kept++
		}
		lw, lo := leftPerPriority(with), leftPerPriority(without)
		for prio := MaxPriority; prio >= 0; prio-- {
			if lw[prio] != lo[prio] {
				if lw[prio] > lo[prio] {
					t.Fatalf("seed %d: priority %d left %d pending with the alternatives, %d without", seed, prio, lw[prio], lo[prio])
				}
				break
			}
		}
		if !alternative && fmt.Sprint(with.Placements) != fmt.Sprint(without.Placements) {
			t.Fatalf("seed %d: no alternative kept, yet the plan changed", seed)
		}
		if err := appliesInOrder(cell, with); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	if kept == 0 {
		t.Fatal("no alternative rule's plan kept: the cells test nothing")
	}
	t.Logf("an alternative rule's plan kept on %d of 400 cells", kept)
}
