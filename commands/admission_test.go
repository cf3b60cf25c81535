package commands

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// The attack that once wrapped a user's charge negative: two tasks of
// 2^62 millicores sum to -2^63, and the next over-quota job got in.
func TestAdmissionArithmeticCannotWrap(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	c.quota("alice", "batch", 4000, 8*gib)
	for _, tc := range []struct {
		name  string
		res   *events.Resources
		count int32
		prio  int32
		code  Code
		field string
	}{
		{"cpu past the ceiling", &events.Resources{CpuMilli: 1 << 62, MemoryBytes: gib}, 2, 0, InvalidArgument, "resources.cpu"},
		{"cpu wraps", &events.Resources{CpuMilli: math.MaxInt64, MemoryBytes: gib}, 1, 5, InvalidArgument, "resources.cpu"},
		{"memory past the ceiling", &events.Resources{CpuMilli: 100, MemoryBytes: 1 << 62}, 1, 0, InvalidArgument, "resources.memory"},
		{"disk past the ceiling", &events.Resources{CpuMilli: 100, MemoryBytes: gib, DiskBytes: math.MaxInt64}, 1, 0, InvalidArgument, "resources.disk"},
		{"negative cpu", &events.Resources{CpuMilli: -1, MemoryBytes: gib}, 1, 0, InvalidArgument, "resources.cpu"},
		{"negative memory", &events.Resources{CpuMilli: 100, MemoryBytes: math.MinInt64}, 1, 0, InvalidArgument, "resources.memory"},
		// Each task at the ceiling, the job past what any user may hold.
		{"job total past the most a user may hold", &events.Resources{CpuMilli: 100, MemoryBytes: events.MaxTaskMemoryBytes}, MaxTasks, 0, InvalidArgument, "resources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := spec("huge", tc.prio, tc.count)
			sp.Resources = tc.res
			e := c.refused(SubmitJob{Meta: alice, Spec: sp}, tc.code)
			if e.Field != tc.field {
				t.Errorf("%s: refusal names %q: %v; want %q", tc.name, e.Field, e, tc.field)
			}
		})
	}
	// Nothing was charged, and the quota still holds.
	for ub, r := range c.s.Charged {
		if !r.IsZero() {
			t.Fatalf("%v charged %s after refusals", ub, r)
		}
	}
	c.do(SubmitJob{Meta: alice, Spec: spec("fits", 5, 4)})
	c.refused(SubmitJob{Meta: alice, Spec: spec("over", 5, 1)}, ResourceExhausted)
}

// Validation and the agent read one memory floor: a task the agent would
// refuse to start is refused at submission.
func TestMemoryFloorIsTheAgents(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	sp := spec("tiny", 0, 1)
	sp.Resources = &events.Resources{CpuMilli: 100, MemoryBytes: 1 << 20}
	e := c.refused(SubmitJob{Meta: alice, Spec: sp}, InvalidArgument)
	if e.Field != "resources.memory" || !strings.Contains(e.Error(), "4MiB") && !strings.Contains(e.Error(), "4 MiB") {
		t.Fatalf("refusal: %v", e)
	}
	sp.Resources.MemoryBytes = events.MinTaskMemoryBytes
	c.do(SubmitJob{Meta: alice, Spec: sp})
}

// Admission is a property of every sequence of accepted commands: no
// user's charge is ever negative or past events.MaxTotal, and a command
// that raised a charge in a quota'd band left it within the quota.
func FuzzAdmission(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("\x00\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0\xff\xfe\xfd"))
	r := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		b := make([]byte, 64+r.IntN(400))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		checkAdmission(t, script)
	})
}

// quantities are the values the property draws from: the boundaries, the
// ceilings and the wrapping values.
var quantities = []int64{0, 1, -1, 100, 1000, 4 << 20, gib, 8 * gib,
	events.MaxTaskCPUMilli, events.MaxTaskMemoryBytes, events.MaxTaskDiskBytes,
	int64(events.MaxTotal), int64(events.MaxTotal) + 1, 1 << 62, math.MaxInt64, math.MinInt64,
	math.MaxInt64 / 2, math.MaxInt64/2 + 1, 3 << 61}

// checkAdmission runs script and returns how many commands of each kind
// were accepted.
func checkAdmission(t *testing.T, script []byte) (accepted [5]int) {
	s := projections.New()
	now := t0
	users := []Meta{alice, bob}
	do := func(cmd Command) bool {
		evs, err := Decide(s, cmd, FixedClock(now))
		if err != nil {
			if len(evs) != 0 {
				t.Fatalf("%T refused with %d events", cmd, len(evs))
			}
			return false
		}
		for _, e := range evs {
			if err := projections.Apply(s, e); err != nil {
				t.Fatal(err)
			}
		}
		return true
	}
	do(RegisterMachine{Meta: root, Machine: "m0", Address: "10.0.0.1:7000",
		Capacity: projections.Resources{CPUMilli: 64000, MemoryBytes: 256 * gib, DiskBytes: 1 << 40, Ports: 1000}})
	next := func() int64 {
		if len(script) < 2 {
			script = nil
			return 0
		}
		v := int64(binary.LittleEndian.Uint16(script))
		script = script[2:]
		return v
	}
	// pick is mostly an ordinary quantity up to scale, sometimes an extreme.
	pick := func(scale int64) int64 {
		if v := next(); v%4 == 0 {
			return quantities[(v/4)%int64(len(quantities))]
		}
		return next() * scale / 65536
	}
	for step := 0; len(script) > 0; step++ {
		op, who := next(), users[step%2]
		who.RequestID = ""
		before := make(map[projections.UserBand]projections.Resources, len(s.Charged))
		for ub, r := range s.Charged {
			before[ub] = r
		}
		var cmd Command
		switch op % 5 {
		case 0:
			cmd = SetQuota{Meta: root, User: who.Actor.User, Band: []string{"batch", "production", "monitoring"}[next()%3],
				Resources: projections.Resources{CPUMilli: pick(64000), MemoryBytes: pick(256 * gib), DiskBytes: pick(1 << 40), Ports: pick(1000)}}
		case 1, 2:
			sp := spec([]string{"a", "b", "c"}[next()%3], int32(next()%12), int32(pick(64)))
			sp.Resources = &events.Resources{CpuMilli: pick(16000), MemoryBytes: pick(64 * gib), DiskBytes: pick(gib), Ports: int32(pick(8))}
			cmd = SubmitJob{Meta: who, Spec: sp}
		case 3:
			count, prio := int32(pick(64)), int32(next()%12)
			cmd = UpdateJob{Meta: who, Selector: "team=web", Change: JobChange{TaskCount: &count, Priority: &prio}}
		case 4:
			cmd = KillJob{Meta: who, Name: []string{"a", "b", "c"}[next()%3]}
		}
		if !do(cmd) {
			continue
		}
		accepted[op%5]++
		now = now.Add(1)
		_, quotaChange := cmd.(SetQuota)
		for ub, r := range s.Charged {
			if r.Negative() {
				t.Fatalf("step %d %T: %v charged %s, negative", step, cmd, ub, r)
			}
			if r.Saturate() != r {
				t.Fatalf("step %d %T: %v charged %s, past the most a user may hold", step, cmd, ub, r)
			}
			raised := !r.LessEq(before[ub])
			if !quotaChange && raised && ub.Band != projections.BestEffort && !r.LessEq(s.Quotas[ub]) {
				t.Fatalf("step %d %T raised %v to %s past its quota %s", step, cmd, ub, r, s.Quotas[ub])
			}
		}
	}
	return accepted
}

// The property over many seeded scripts, in every test run.
func TestAdmissionNeverPastQuota(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	var total [5]int
	for range 300 {
		b := make([]byte, 200+r.IntN(800))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		n := checkAdmission(t, b)
		for i := range total {
			total[i] += n[i]
		}
	}
	// A property over refusals alone proves nothing.
	if total[1]+total[2] < 100 || total[3] < 10 {
		t.Fatalf("too few commands accepted to say anything (quota, submit, submit, update, kill): %v", total)
	}
}
