package scheduler

import "slices"

// Across passes, a scheduler that remembers machines also keeps what each
// machine said when it explained a class (a verdict: the check's reason,
// the failing constraint, whether the machine matches the hard
// constraints, the most it could offer). A class stuck in the queue is
// explained every pass against every machine; with the memory, only the
// machines that changed since are checked again, and a cell with work that
// fits nowhere pays per pass for those, not for every machine.
//
// The memory is exact on the same terms as the infeasible verdicts
// (infeasible.go): a verdict is kept only when found on the machine as the
// pass's input holds it (nothing placed on or evicted from it in that
// pass), and used only on the same input Machine, untouched in this pass,
// for a class of the same key. Everything a verdict holds is a function of
// those two.

// verdict is what explain found for a class on one machine.
type verdict struct {
	avail      Resources // the most the machine could offer, when it fails on room only
	constraint int32     // the failing hard constraint, for ReasonConstraint
	reason     Reason
	ok         bool
	matchHard  bool // every hard constraint matches (read when it failed on state or crashes)
	kept       bool // found on the machine as the input holds it
}

// explainedClass is one class's verdicts, by machine index in the pass.
type explainedClass struct {
	key      string
	verdicts []verdict
}

// maxExplainedVerdicts bounds the verdicts kept (48 bytes each: 25 MB, or
// some 50 classes on 10,000 machines); classes beyond it are explained
// afresh each pass.
var maxExplainedVerdicts = 1 << 19

// recallExplained reads, before the classes are explained, the last pass's
// verdicts and where each of this pass's machines stood in that pass.
func (p *pass) recallExplained() {
	if p.memo == nil || p.cfg.NoExplanations {
		return
	}
	p.memo.mu.Lock()
	prev, last := p.memo.explainedMachines, p.memo.explained
	p.memo.mu.Unlock()
	if len(last) > 0 {
		p.lastExplained, p.explainWhere = last, indexIn(prev, p.cell.Machines)
	}
}

// explainedBefore is the verdict the last pass found on machine mi (last
// is that pass's verdicts for the class), if it holds now: the same input
// machine, untouched in this pass.
func (p *pass) explainedBefore(last []verdict, mi int32) (verdict, bool) {
	if last == nil || p.gens[mi] != 0 {
		return verdict{}, false
	}
	j := mi
	if p.explainWhere != nil {
		j = p.explainWhere[mi]
	}
	if j < 0 || !last[j].kept {
		return verdict{}, false
	}
	return last[j], true
}

// rememberExplained keeps this pass's verdicts for the next (explain kept
// them within maxExplainedVerdicts, in the order it explained the classes).
func (p *pass) rememberExplained() {
	if p.memo == nil || p.cfg.NoExplanations {
		return
	}
	next := make(map[string][]verdict, len(p.explained))
	for _, e := range p.explained {
		next[e.key] = e.verdicts
	}
	p.memo.mu.Lock()
	// A copy: the caller may reuse its slice for the next cell.
	p.memo.explainedMachines, p.memo.explained = slices.Clone(p.cell.Machines), next
	p.memo.mu.Unlock()
}
