package writer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/commands/writer"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func admin(id string) commands.Meta {
	return commands.Meta{Actor: commands.Actor{User: "root", Admin: true}, RequestID: id}
}

func register(id, machine string) writer.Op {
	return writer.Op{Cmd: commands.RegisterMachine{Meta: admin(id), Machine: machine, Address: machine + ":1",
		Capacity: projections.Resources{CPUMilli: 1000, MemoryBytes: 1 << 30}}}
}

// TestPlanDecidesInOrderAgainstTheBatch: each command sees the ones before
// it; a refusal is answered at once and, for want of a capability,
// recorded; a retry of a request in the batch waits; ops beyond a Single
// one are left for later.
func TestPlanDecidesInOrderAgainstTheBatch(t *testing.T) {
	st := projections.New()
	notAdmin := commands.Meta{Actor: commands.Actor{User: "alice"}, RequestID: "d"}
	ops := []writer.Op{
		register("a", "m1"),
		register("b", "m1"), // refused: m1 is registered by the op before it
		{Cmd: commands.DrainMachine{Meta: notAdmin, Machine: "m1", Draining: true}},
		register("a", "m1"), // a retry of the first: waits for its outcome
		register("c", "m2"),
		{Cmd: commands.RegisterMachine{Meta: admin("e"), Machine: "m3", Address: "m3:1"}, Single: true},
	}
	b := writer.Plan(st, ops, 7, 64, writer.NewRecent(10), clock)
	if len(b.Appends) != 2 || b.Ops[0] != 0 || b.Ops[1] != 4 {
		t.Fatalf("appends for ops %v, want [0 4]", b.Ops)
	}
	if b.Appends[0].ExpectedPosition != 0 || b.Appends[1].ExpectedPosition != events.AnyPosition || b.Appends[0].Epoch != 7 {
		t.Fatalf("append requests: %+v", b.Appends)
	}
	if b.Appends[0].IdempotencyKey != "root/a" {
		t.Fatalf("idempotency key %q", b.Appends[0].IdempotencyKey)
	}
	if len(b.Answers) != 2 || b.Answers[0].Op != 1 || b.Answers[0].Err == nil || b.Answers[1].Op != 2 || b.Answers[1].Err == nil {
		t.Fatalf("answers %+v", b.Answers)
	}
	if len(b.Refusals) != 1 {
		t.Fatalf("%d refusals recorded, want the drain's alone", len(b.Refusals))
	}
	if r := b.Refusals[0].Data.(*events.CommandRefused); r.Command != "DrainMachine" || r.Actor != "alice" {
		t.Fatalf("refusal %+v", r)
	}
	if len(b.Later) != 2 || b.Later[0] != 3 || b.Later[1] != 5 {
		t.Fatalf("later %v, want [3 5]", b.Later)
	}
	if st.Machines["m1"] == nil || st.Machines["m2"] == nil {
		t.Fatal("the batch's commands were not applied to the state speculatively")
	}
}

// TestFinishRemembersAndAnswers: a landed batch answers each op with its
// positions and remembers the ids, so a retry is answered from memory.
func TestFinishRemembersAndAnswers(t *testing.T) {
	st := projections.New()
	recent := writer.NewRecent(10)
	ops := []writer.Op{register("a", "m1"), register("b", "m2")}
	b := writer.Plan(st, ops, 1, 64, recent, clock)
	out := writer.Finish(b, []events.AppendResult{{First: 1, Last: 1}, {First: 2, Last: 2}}, nil, recent)
	if !out.Landed || out.Reload || len(out.Answers) != 2 || out.Answers[1].Result.First != 2 {
		t.Fatalf("outcome %+v", out)
	}
	again := writer.Plan(st, []writer.Op{register("b", "m2")}, 1, 64, recent, clock)
	if len(again.Appends) != 0 || len(again.Answers) != 1 || !again.Answers[0].Result.Duplicate || again.Answers[0].Check != writer.CheckSameRequest {
		t.Fatalf("a retry: %+v", again)
	}
}

// TestFinishOnFailures: every failure reloads; a fenced epoch deposes; a
// batch holding a retry the cache forgot is redone one by one; a reused
// id asks the store; a lone duplicate is answered with the first result.
func TestFinishOnFailures(t *testing.T) {
	plan := func() writer.Batch {
		return writer.Plan(projections.New(), []writer.Op{register("a", "m1"), register("b", "m2")}, 1, 64, writer.NewRecent(10), clock)
	}
	recent := writer.NewRecent(10)
	if out := writer.Finish(plan(), nil, events.ErrFenced, recent); !out.Reload || !out.Deposed || len(out.Answers) != 2 || !errors.Is(out.Answers[0].Err, events.ErrFenced) {
		t.Fatalf("fenced: %+v", out)
	}
	if out := writer.Finish(plan(), nil, events.ErrDuplicateInBatch, recent); !out.Reload || len(out.Retry) != 2 || len(out.Answers) != 0 {
		t.Fatalf("duplicate in batch: %+v", out)
	}
	if out := writer.Finish(plan(), nil, errors.New("connection reset"), recent); !out.Reload || len(out.Answers) != 2 || out.Answers[0].Err == nil {
		t.Fatalf("store error: %+v", out)
	}
	one := writer.Plan(projections.New(), []writer.Op{register("a", "m1")}, 1, 64, writer.NewRecent(10), clock)
	if out := writer.Finish(one, nil, events.ErrRequestReused, recent); !out.Reload || out.Answers[0].Check != writer.CheckReused {
		t.Fatalf("reused: %+v", out)
	}
	out := writer.Finish(one, []events.AppendResult{{First: 5, Last: 5, Duplicate: true}}, nil, recent)
	if !out.Reload || !out.Answers[0].Result.Duplicate || out.Answers[0].Result.First != 5 {
		t.Fatalf("lone duplicate: %+v", out)
	}
	if res, _, ok := recent.Get("root/a"); !ok || res.First != 5 {
		t.Fatalf("the duplicate's first result is not remembered: %+v %v", res, ok)
	}
}
