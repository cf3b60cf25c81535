package scheduler

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Scenario scripts: testdata/scenarios/*.txt describe a cell line by line
// and run passes over it; the expected output follows each "schedule" under
// "----", ending at a blank line. Regenerate with:
//
//	go test ./scheduler/ -run TestScenarios -rewrite
//
// Commands:
//
//	machine NAME cpu=4 mem=16GiB [disk= gpu= ports= portbase=] [state=down|draining] [pkgs=a,b] [ATTR=VALUE...]
//	placed MACHINE USER/JOB/INDEX prio=P cpu= mem= [res.cpu= res.mem=] [portlist=31000,31001] [alloc=SET/INDEX] [pkg=]
//	alloc MACHINE USER/SET/INDEX prio=P cpu= mem=
//	pending USER/JOB/INDEX prio=P cpu= mem= [gpu= disk= ports=] [seq=N] [hard=C] [soft=C] [alloc=SET] [pkg=] [crashed=m1,m2]
//	pending-alloc USER/SET/INDEX prio=P cpu= mem= [hard=C]
//	schedule [seed=N] [policy=P] [k=K]
//	apply    (the last plan: placements join their machines, victims go back to pending)
//
// A constraint C is ATTR=V, ATTR!=V, ATTR<V, ATTR>V, ATTR:in:V1|V2 or
// ATTR:exists.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of scenario scripts")

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScenario(t, file)
		})
	}
}

type scenario struct {
	cell   Cell
	byName map[string]*Machine
	seq    int64
	last   *Plan
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := &scenario{byName: map[string]*Machine{}}
	lines := strings.Split(string(data), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		out.WriteByte('\n')
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		got, err := sc.do(trimmed)
		if err != nil {
			t.Fatalf("%s:%d: %v", file, i+1, err)
		}
		if got == "" {
			continue
		}
		// Expected output: "----" then lines up to a blank line.
		var want []string
		j := i + 1
		if j < len(lines) && lines[j] == "----" {
			for j++; j < len(lines) && lines[j] != ""; j++ {
				want = append(want, lines[j])
			}
		} else {
			j = i + 1
		}
		got = strings.TrimRight(got, "\n")
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, i+1, trimmed, got, strings.Join(want, "\n"))
		}
		out.WriteString("----\n")
		out.WriteString(got)
		out.WriteString("\n")
		if j < len(lines) && lines[j] != "" {
			out.WriteString("\n") // the blank line that ends the output
		}
		i = j - 1
	}
	if *rewrite {
		text := strings.TrimRight(out.String(), "\n") + "\n"
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scenarioLine is a script line: a command, positional words, key=value
// arguments (hard= and soft= constraints apart) and the resources they
// name.
type scenarioLine struct {
	cmd        string
	pos        []string
	args       map[string]string
	hard, soft []string
	res        Resources
}

func parseScenarioLine(line string) (scenarioLine, error) {
	f := strings.Fields(line)
	l := scenarioLine{cmd: f[0], args: map[string]string{}}
	for _, a := range f[1:] {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case !ok:
			l.pos = append(l.pos, a)
		case k == "hard":
			l.hard = append(l.hard, v)
		case k == "soft":
			l.soft = append(l.soft, v)
		default:
			l.args[k] = v
		}
	}
	var err error
	l.res, err = parseResources(l.args, "")
	return l, err
}

func (sc *scenario) do(line string) (string, error) {
	l, err := parseScenarioLine(line)
	if err != nil {
		return "", err
	}
	switch l.cmd {
	case "machine":
		return "", sc.machine(l)
	case "placed", "alloc":
		return "", sc.placed(l)
	case "pending":
		return "", sc.pending(l)
	case "pending-alloc":
		return "", sc.pendingAlloc(l)
	case "schedule":
		return sc.schedule(l)
	case "apply":
		sc.apply()
		return "", nil
	}
	return "", fmt.Errorf("unknown command %q", l.cmd)
}

// machine adds a machine: "machine NAME cpu=... [state=...] [attr=value]".
func (sc *scenario) machine(l scenarioLine) error {
	if len(l.pos) != 1 {
		return fmt.Errorf("machine: want a name")
	}
	m := &Machine{Name: l.pos[0], Version: 1, Capacity: l.res, Attributes: map[string]string{}}
	for k, v := range l.args {
		switch k {
		case "cpu", "mem", "disk", "gpu", "ports", "prio":
		case "portbase":
			n, _ := strconv.Atoi(v)
			m.PortBase = int32(n)
		case "state":
			m.State = map[string]MachineState{"up": MachineUp, "down": MachineDown, "draining": MachineDraining}[v]
		case "pkgs":
			m.Packages = strings.Split(v, ",")
		default:
			m.Attributes[k] = v
		}
	}
	sc.cell.Machines = append(sc.cell.Machines, m)
	sc.byName[m.Name] = m
	return nil
}

// placed puts a task ("placed") or an alloc ("alloc") on a machine.
func (sc *scenario) placed(l scenarioLine) error {
	if len(l.pos) != 2 {
		return fmt.Errorf("%s: want a machine and a task", l.cmd)
	}
	m := sc.byName[l.pos[0]]
	ref, err := parseRef(l.pos[1])
	if m == nil || err != nil {
		return fmt.Errorf("%s: bad machine or task: %v", l.cmd, err)
	}
	prio, _ := strconv.Atoi(l.args["prio"])
	if l.cmd == "alloc" {
		m.Allocs = append(m.Allocs, PlacedAlloc{Set: AllocSetRef{User: ref.User, Name: ref.Job}, Index: ref.Index, Priority: int32(prio), Capacity: l.res})
		return nil
	}
	pt := PlacedTask{Ref: ref, Priority: int32(prio), Limit: l.res, Reservation: l.res, Package: l.args["pkg"]}
	if r, err := parseResources(l.args, "res."); err != nil {
		return err
	} else if !r.IsZero() {
		pt.Reservation = r
	}
	if v := l.args["portlist"]; v != "" {
		for _, p := range strings.Split(v, ",") {
			n, _ := strconv.Atoi(p)
			pt.Ports = append(pt.Ports, int32(n))
		}
		pt.Limit[Ports], pt.Reservation[Ports] = int64(len(pt.Ports)), int64(len(pt.Ports))
	}
	if v := l.args["alloc"]; v != "" {
		set, idx, _ := strings.Cut(v, "/")
		n, _ := strconv.Atoi(idx)
		pt.AllocSet, pt.AllocIndex = set, int32(n)
	}
	m.Tasks = append(m.Tasks, pt)
	return nil
}

func (sc *scenario) pending(l scenarioLine) error {
	if len(l.pos) != 1 {
		return fmt.Errorf("pending: want a task")
	}
	ref, err := parseRef(l.pos[0])
	if err != nil {
		return err
	}
	prio, _ := strconv.Atoi(l.args["prio"])
	sc.seq++
	pt := PendingTask{Ref: ref, Priority: int32(prio), Seq: sc.seq, SpecVersion: 1, Resources: l.res,
		AllocSet: l.args["alloc"], Package: l.args["pkg"]}
	if v := l.args["seq"]; v != "" {
		pt.Seq, _ = strconv.ParseInt(v, 10, 64)
	}
	if v := l.args["crashed"]; v != "" {
		pt.CrashedOn = strings.Split(v, ",")
	}
	for _, c := range l.hard {
		pt.Constraints = append(pt.Constraints, parseConstraint(c, false))
	}
	for _, c := range l.soft {
		pt.Constraints = append(pt.Constraints, parseConstraint(c, true))
	}
	sc.cell.Pending = append(sc.cell.Pending, pt)
	return nil
}

func (sc *scenario) pendingAlloc(l scenarioLine) error {
	if len(l.pos) != 1 {
		return fmt.Errorf("pending-alloc: want an alloc")
	}
	r, err := parseRef(l.pos[0])
	if err != nil {
		return err
	}
	prio, _ := strconv.Atoi(l.args["prio"])
	sc.seq++
	a := PendingAlloc{Set: AllocSetRef{User: r.User, Name: r.Job}, Index: r.Index, Priority: int32(prio), Seq: sc.seq, Resources: l.res}
	for _, c := range l.hard {
		a.Constraints = append(a.Constraints, parseConstraint(c, false))
	}
	sc.cell.PendingAllocs = append(sc.cell.PendingAllocs, a)
	return nil
}

// schedule runs a pass over the cell and formats its plan.
func (sc *scenario) schedule(l scenarioLine) (string, error) {
	if err := sc.cell.Validate(); err != nil {
		return "", err
	}
	cfg := DefaultConfig()
	seed := uint64(1)
	if v := l.args["seed"]; v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	if v := l.args["policy"]; v != "" {
		p, err := ParsePolicy(v)
		if err != nil {
			return "", err
		}
		cfg.Policy = p
	}
	if v := l.args["k"]; v != "" {
		cfg.FeasibleK, _ = strconv.Atoi(v)
	}
	sc.last = Schedule(&sc.cell, cfg, seed)
	return formatPlan(sc.last), nil
}

// apply folds the last plan into the cell, as the projection would.
func (sc *scenario) apply() {
	placed := map[TaskRef]Placement{}
	for _, p := range sc.last.Placements {
		placed[p.Task] = p
	}
	var still []PendingTask
	for _, t := range sc.cell.Pending {
		p, ok := placed[t.Ref]
		if !ok {
			still = append(still, t)
			continue
		}
		m := sc.byName[p.Machine]
		m.Version++
		lim := t.Resources
		m.Tasks = append(m.Tasks, PlacedTask{Ref: t.Ref, Priority: t.Priority, Limit: lim, Reservation: lim,
			Ports: p.Ports, AllocSet: p.AllocSet, AllocIndex: p.AllocIndex, Package: t.Package})
		for _, v := range p.Preempted {
			i := slices.IndexFunc(m.Tasks, func(pt PlacedTask) bool { return pt.Ref == v })
			pt := m.Tasks[i]
			m.Tasks = slices.Delete(m.Tasks, i, i+1)
			sc.seq++
			still = append(still, PendingTask{Ref: pt.Ref, Priority: pt.Priority, Seq: sc.seq, SpecVersion: 1,
				Resources: pt.Limit, Package: pt.Package})
		}
	}
	sc.cell.Pending = still
	placedAllocs := map[AllocRef]AllocPlacement{}
	for _, p := range sc.last.AllocPlacements {
		placedAllocs[p.Alloc] = p
	}
	var allocs []PendingAlloc
	for _, a := range sc.cell.PendingAllocs {
		p, ok := placedAllocs[AllocRef{Set: a.Set, Index: a.Index}]
		if !ok {
			allocs = append(allocs, a)
			continue
		}
		m := sc.byName[p.Machine]
		m.Version++
		m.Allocs = append(m.Allocs, PlacedAlloc{Set: a.Set, Index: a.Index, Priority: a.Priority, Capacity: a.Resources})
	}
	sc.cell.PendingAllocs = allocs
}

func formatPlan(p *Plan) string {
	var b strings.Builder
	for _, pl := range p.AllocPlacements {
		fmt.Fprintf(&b, "alloc %s -> %s\n", pl.Alloc, pl.Machine)
	}
	for _, pl := range p.Placements {
		fmt.Fprintf(&b, "%s/%s/%d -> %s", pl.Task.User, pl.Task.Job, pl.Task.Index, pl.Machine)
		if pl.AllocSet != "" {
			fmt.Fprintf(&b, " alloc %s/%d", pl.AllocSet, pl.AllocIndex)
		}
		if len(pl.Ports) > 0 {
			fmt.Fprintf(&b, " ports %v", pl.Ports)
		}
		for _, v := range pl.Preempted {
			fmt.Fprintf(&b, " preempts %s/%s/%d", v.User, v.Job, v.Index)
		}
		b.WriteByte('\n')
	}
	for i := range p.Pending {
		b.WriteString("pending: ")
		b.WriteString(p.Pending[i].String())
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		return "nothing to do\n"
	}
	return b.String()
}

func parseRef(s string) (TaskRef, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return TaskRef{}, fmt.Errorf("task %q: want user/job/index", s)
	}
	n, err := strconv.Atoi(parts[2])
	return TaskRef{User: parts[0], Job: parts[1], Index: int32(n)}, err
}

func parseResources(args map[string]string, prefix string) (Resources, error) {
	var r Resources
	for key, d := range map[string]Dim{"cpu": CPU, "mem": Memory, "disk": Disk, "gpu": GPU, "ports": Ports} {
		v, ok := args[prefix+key]
		if !ok {
			continue
		}
		q, err := parseQuantity(d, v)
		if err != nil {
			return r, fmt.Errorf("%s%s: %v", prefix, key, err)
		}
		r[d] = q
	}
	return r, nil
}

func parseQuantity(d Dim, v string) (int64, error) {
	switch d {
	case CPU, GPU:
		f, err := strconv.ParseFloat(v, 64)
		return int64(f * 1000), err
	case Memory, Disk:
		for _, u := range []struct {
			suffix string
			size   float64
		}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
			if num, ok := strings.CutSuffix(v, u.suffix); ok {
				f, err := strconv.ParseFloat(num, 64)
				return int64(f * u.size), err
			}
		}
		return 0, fmt.Errorf("%q: want a unit (B, KiB, MiB, GiB, TiB)", v)
	}
	return strconv.ParseInt(v, 10, 64)
}

func parseConstraint(s string, soft bool) Constraint {
	if attr, ok := strings.CutSuffix(s, ":exists"); ok {
		return Constraint{Attribute: attr, Op: OpExists, Soft: soft}
	}
	if attr, vals, ok := strings.Cut(s, ":in:"); ok {
		return Constraint{Attribute: attr, Op: OpIn, Values: strings.Split(vals, "|"), Soft: soft}
	}
	for _, op := range []Op{OpNe, OpLt, OpGt, OpEq} {
		if attr, val, ok := strings.Cut(s, string(op)); ok {
			return Constraint{Attribute: attr, Op: op, Values: []string{val}, Soft: soft}
		}
	}
	return Constraint{Attribute: s, Op: "?", Soft: soft}
}
