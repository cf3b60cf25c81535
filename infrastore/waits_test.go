package infrastore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/history"
)

// pending_reasons turns the scheduler's records of why a task waits into
// intervals: a reason lasts until the next record for the task, the last
// one until the task is placed.
func TestPendingReasonsAreIntervals(t *testing.T) {
	c := history.New(history.Small, 9)
	c.Run(3000)
	evs := c.Log
	k, q, task := placedAfterWait(evs)
	if task == nil {
		t.Fatal("no task placed after a wait in the history")
	}
	reason := func(at time.Time, why, hint string) events.Event {
		return events.Event{Type: "PendingReasonsChanged", Stream: events.SchedulerStream, OccurredAt: at, RecordedAt: at,
			Data: &events.PendingReasonsChanged{Reasons: []*events.PendingReason{
				{User: task.User, Job: task.Job, Indexes: []int32{task.Index}, Reason: why, Hint: hint}}}}
	}
	tA, tB, tPlaced := evs[k].OccurredAt, evs[q-1].OccurredAt, evs[q].OccurredAt
	var log []events.Event
	log = append(log, evs[:k+1]...)
	log = append(log, reason(tA, "not enough memory", "with memory <= 1GiB it would fit on 2 machines"))
	log = append(log, evs[k+1:q]...)
	log = append(log, reason(tB, "not enough cpu", ""))
	log = append(log, evs[q:]...)
	s := openStore(t, Options{})
	if _, err := s.CatchUp(context.Background(), sliceReader(positioned(log))); err != nil {
		t.Fatal(err)
	}
	got := pendingIntervals(t, s, task)
	want := []pendingInterval{
		{"not enough memory", "with memory <= 1GiB it would fit on 2 machines", tA.UnixMicro(), tB.UnixMicro()},
		{"not enough cpu", "", tB.UnixMicro(), tPlaced.UnixMicro()},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("pending_reasons of %s/%s/%d:\n got %+v\nwant %+v", task.User, task.Job, task.Index, got, want)
	}
	// As of a time: while it waits, one reason holds; once placed, none.
	for _, c := range []struct {
		name string
		at   time.Time
		want int
	}{{"first reason", tA, 1}, {"between", tA.Add(tB.Sub(tA) / 2), 1}, {"placed", tPlaced.Add(time.Second), 0}} {
		t.Run(c.name, func(t *testing.T) {
			rows, err := s.Query(context.Background(), fmt.Sprintf(`SELECT reason FROM pending_reasons_at('%s') WHERE user = '%s' AND job = '%s' AND task_index = %d`,
				c.at.UTC().Format("2006-01-02 15:04:05.999999"), task.User, task.Job, task.Index), 0)
			if err != nil || len(rows.Rows) != c.want {
				t.Fatalf("pending_reasons_at(%s): %+v %v, want %d rows", c.at, rows, err, c.want)
			}
		})
	}
	// The guarded query path sees it too.
	res, err := s.Query(context.Background(), `SELECT reason, sum(epoch(until - since)) AS seconds FROM pending_reasons GROUP BY reason ORDER BY reason`, 0)
	if err != nil || len(res.Rows) != 2 {
		t.Fatalf("query: %+v %v", res, err)
	}
}

// placedAfterWait finds a task whose submission (evs[k], past the first
// hundred events) is followed in its stream, after something else, by
// its placement (evs[q]); task is nil when there is none.
func placedAfterWait(evs []events.Event) (k, q int, task *events.TaskSubmitted) {
	for i, e := range evs {
		p, ok := e.Data.(*events.TaskSubmitted)
		if !ok || i < 100 {
			continue
		}
		for j := i + 2; j < len(evs); j++ {
			if evs[j].Stream != e.Stream {
				continue
			}
			if _, placed := evs[j].Data.(*events.TaskScheduled); placed {
				return i, j, p
			}
			break
		}
	}
	return -1, -1, nil
}

// pendingInterval is a row of pending_reasons.
type pendingInterval struct {
	reason, hint string
	since, until int64
}

// pendingIntervals are task's rows of pending_reasons, by since.
func pendingIntervals(t *testing.T, s *Infrastore, task *events.TaskSubmitted) []pendingInterval {
	rows, err := s.db.QueryContext(context.Background(), `SELECT reason, hint, epoch_us(since), epoch_us(until) FROM pending_reasons
		WHERE user = ? AND job = ? AND task_index = ? ORDER BY since`, task.User, task.Job, task.Index)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []pendingInterval
	for rows.Next() {
		var r pendingInterval
		if err := rows.Scan(&r.reason, &r.hint, &r.since, &r.until); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	return got
}
