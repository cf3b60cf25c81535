package commands

import "testing"

func TestSmoke(t *testing.T) {
	c := newCell(t)
	c.machines(2)
	c.quota("alice", "production", 8000, 32*gib)
	c.do(SubmitJob{Meta: alice, Spec: spec("web", 9, 3)})
	if c.s.PendingCount() != 3 {
		t.Fatalf("pending %d", c.s.PendingCount())
	}
	c.place("alice", "web", 0, "m0")
	c.place("alice", "web", 1, "m1")
	c.start("m0")
	c.start("m1")
	if got := c.task("alice", "web", 0).State; got.String() != "running" {
		t.Fatal(got)
	}
	if err := c.s.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
}
