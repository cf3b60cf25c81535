package commands

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
)

// Only what changed is recorded: a reason repeated by the next pass costs
// no event, a new hint does, a placed task is left out, and only the
// scheduler (an admin) may record.
func TestRecordPendingReasonsOnlyOnChange(t *testing.T) {
	c := newCell(t)
	c.machines(1)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 0, 3)})
	c.place("alice", "web", 2, "m0")
	why := func(reason, hint string, idx ...int32) RecordPendingReasons {
		return RecordPendingReasons{Meta: root, Reasons: []*events.PendingReason{{User: "alice", Job: "web", Indexes: idx, Reason: reason, Hint: hint}}}
	}
	evs := c.do(why("not enough memory", "", 0, 1, 2))
	checkEvents(t, evs, []expect{{events.SchedulerStream, &events.PendingReasonsChanged{Reasons: []*events.PendingReason{
		{User: "alice", Job: "web", Indexes: []int32{0, 1}, Reason: "not enough memory"}}}}})
	if tk := c.task("alice", "web", 0); tk.WaitReason != "not enough memory" || c.task("alice", "web", 2).WaitReason != "" {
		t.Fatalf("recorded: %+v", tk)
	}
	if evs := c.do(why("not enough memory", "", 0, 1)); len(evs) != 0 {
		t.Fatalf("the same reason again wrote %s", dump(evs))
	}
	evs = c.do(why("not enough memory", "with memory <= 1GiB it would fit on 1 machine", 0, 1))
	if len(evs) != 1 || len(evs[0].Data.(*events.PendingReasonsChanged).Reasons[0].Indexes) != 2 {
		t.Fatalf("a new hint: %s", dump(evs))
	}
	// Placed, its wait is over; pending again, it is recorded afresh.
	c.place("alice", "web", 0, "m0")
	if tk := c.task("alice", "web", 0); tk.WaitReason != "" || tk.WaitHint != "" {
		t.Fatalf("a placed task keeps its wait: %+v", tk)
	}
	long := strings.Repeat("é", 1000)
	evs = c.do(why(long, "", 1))
	if r := evs[0].Data.(*events.PendingReasonsChanged).Reasons[0].Reason; len(r) > maxReasonBytes || !strings.HasPrefix(long, r) {
		t.Fatalf("a long reason is kept as %d bytes", len(r))
	}
	c.refused(RecordPendingReasons{Meta: alice, Reasons: why("x", "", 1).Reasons}, PermissionDenied)
}
