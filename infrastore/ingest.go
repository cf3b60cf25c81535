package infrastore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/events"
)

// Run tails the log in store from the position stored in the file and
// applies every event exactly once, until ctx ends (it then returns
// ctx.Err()) or an error occurs. Calling Run again resumes where the last
// committed batch ended, whatever moment the previous run stopped at.
func (s *Infrastore) Run(ctx context.Context, store events.Store) error {
	release, err := s.claim()
	if err != nil {
		return err
	}
	defer release()
	if s.stale {
		return ErrRebuildNeeded
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		if err := s.catchUp(ctx, conn, store); err != nil {
			return err
		}
		// Caught up: wait for the next append.
		sub := store.Subscribe(s.position())
		evs, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if err := s.applyEvents(ctx, conn, evs, nil); err != nil {
			return err
		}
	}
}

// CatchUp applies every event up to the log's head and returns the position
// reached. It is Run without the wait at the end.
func (s *Infrastore) CatchUp(ctx context.Context, store events.Reader) (int64, error) {
	release, err := s.claim()
	if err != nil {
		return 0, err
	}
	defer release()
	if s.stale {
		return 0, ErrRebuildNeeded
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	err = s.catchUp(ctx, conn, store)
	return s.position(), err
}

// Rebuild re-derives every table from the log: it drops and recreates the
// tables with the current schema (rows imported from a trace are kept), then
// replays the log from position 1. Until it finishes, queries see a partial
// history; if it stops early, Run or CatchUp goes on from where it stopped.
func (s *Infrastore) Rebuild(ctx context.Context, store events.Reader) (int64, error) {
	release, err := s.claim()
	if err != nil {
		return 0, err
	}
	defer release()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := s.reset(ctx, conn); err != nil {
		return 0, fmt.Errorf("infrastore: rebuild: %w", err)
	}
	if err := s.catchUp(ctx, conn, store); err != nil {
		return s.position(), fmt.Errorf("infrastore: rebuild: %w", err)
	}
	// Reclaim the dropped tables' blocks now rather than at some later write.
	if _, err := conn.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return s.position(), fmt.Errorf("infrastore: rebuild: checkpoint: %w", err)
	}
	return s.position(), nil
}

// traceTables are the tables that may hold rows of other sources than the
// log; a rebuild keeps those rows.
var traceTables = []string{"task_events", "job_events", "machine_events", "task_usage"}

// reset drops and recreates every table in one transaction, keeping rows
// imported from traces, and sets the position back to 0.
func (s *Infrastore) reset(ctx context.Context, conn *sql.Conn) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err := inTx(ctx, conn, func() error {
		for _, t := range traceTables {
			// BY NAME on the way back: columns added since keep their default.
			if _, err := conn.ExecContext(ctx, fmt.Sprintf(
				`CREATE OR REPLACE TEMP TABLE keep_%s AS SELECT * FROM %s WHERE source <> '%s'`, t, t, SourceLog)); err != nil {
				return err
			}
		}
		for i := len(tables) - 1; i >= 0; i-- {
			if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+tables[i].name); err != nil {
				return err
			}
		}
		if _, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS ingest_state"); err != nil {
			return err
		}
		if err := createSchema(ctx, conn); err != nil {
			return err
		}
		for _, t := range traceTables {
			if _, err := conn.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s BY NAME SELECT * FROM keep_%s`, t, t)); err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx, "DROP TABLE keep_"+t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.m, s.stale = newModel(), false
	s.setPosition(0)
	return nil
}

// fetched is one batch read ahead of the writer, payloads already encoded.
type fetched struct {
	evs      []events.Event
	payloads []json.RawMessage
	err      error
}

// catchUp applies batches until a read returns nothing. Reading and JSON
// encoding run one batch ahead of the DuckDB writer, on another goroutine:
// the two halves take about the same time.
func (s *Infrastore) catchUp(ctx context.Context, conn *sql.Conn, r events.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan fetched, 1)
	defer func() {
		cancel()
		for range ch { // let the reader finish before returning
		}
	}()
	from := s.position() + 1
	go func() {
		defer close(ch)
		for {
			evs, err := r.Read(ctx, from, s.opts.BatchSize)
			var f fetched
			switch {
			case err != nil:
				f.err = err
			case len(evs) == 0:
				return
			default:
				f.evs, f.payloads, f.err = evs, make([]json.RawMessage, len(evs)), nil
				for i := range evs {
					f.payloads[i] = payloadJSON(evs[i].Data)
				}
				from = evs[len(evs)-1].Position + 1
			}
			select {
			case ch <- f:
			case <-ctx.Done():
				return
			}
			if f.err != nil {
				return
			}
		}
	}()
	for f := range ch {
		if f.err != nil {
			return f.err
		}
		if err := s.applyEvents(ctx, conn, f.evs, f.payloads); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// payloadJSON renders a payload with proto field names. protojson varies its
// whitespace on purpose; the appender compacts a json.RawMessage, which makes
// the stored text stable.
func payloadJSON(p events.Payload) json.RawMessage {
	if p == nil {
		return json.RawMessage("null")
	}
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(p)
	if err != nil {
		return json.RawMessage("null")
	}
	return raw
}

func specJSON(s *events.JobSpec) json.RawMessage { return payloadJSON(s) }

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

func duckdbMap(m map[any]any) any { return duckdb.Map(m) }

// hookAt lets a test crash the ingester at a named step.
func (s *Infrastore) hookAt(point string) {
	if s.hook != nil {
		s.hook(point)
	}
}

// applyEvents applies one batch and its last position in one transaction:
// either all of the batch's rows and the new position are stored, or none.
func (s *Infrastore) applyEvents(ctx context.Context, conn *sql.Conn, evs []events.Event, payloads []json.RawMessage) error {
	if len(evs) == 0 {
		return nil
	}
	if payloads == nil {
		payloads = make([]json.RawMessage, len(evs))
		for i := range evs {
			payloads[i] = payloadJSON(evs[i].Data)
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	prev := s.position()
	for i := range evs {
		if want := prev + int64(i) + 1; evs[i].Position != want {
			return fmt.Errorf("%w: expected position %d, read %d", ErrLogGap, want, evs[i].Position)
		}
	}
	last := evs[len(evs)-1].Position
	m := s.m
	if m == nil {
		var err error
		if m, err = loadModel(ctx, conn); err != nil {
			return fmt.Errorf("infrastore: loading the ingester's state: %w", err)
		}
	}
	// Until the commit, the model holds changes the file may never get.
	s.m = nil
	b := newBatch()
	for i := range evs {
		m.apply(b, &evs[i], payloads[i])
	}
	s.hookAt("begin")
	err := inTx(ctx, conn, func() error {
		if err := s.appendAll(conn, []tableRows{
			{"events", b.events}, {"job_specs", b.jobSpecs}, {"task_events", b.taskEvents},
			{"job_events", b.jobEvents}, {"machine_events", b.machineEvents},
			{"task_usage", b.taskUsage}, {"scheduling_decisions", b.decisions},
		}); err != nil {
			return err
		}
		if err := s.replaceCurrent(ctx, conn, m, b, prev); err != nil {
			return err
		}
		s.hookAt("position")
		res, err := conn.ExecContext(ctx, `UPDATE ingest_state SET position = ? WHERE position = ?`, last, prev)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// Another writer moved the position: applying would duplicate.
			return fmt.Errorf("%w: stored position is no longer %d", ErrLogGap, prev)
		}
		s.hookAt("commit")
		return nil
	})
	if err != nil {
		return fmt.Errorf("infrastore: applying positions %d-%d: %w", prev+1, last, err)
	}
	s.m = m
	s.setPosition(last)
	s.hookAt("committed")
	return nil
}

type tableRows struct {
	table string
	rows  []row
}

// appendAll appends rows with DuckDB's appender, table by table.
func (s *Infrastore) appendAll(conn *sql.Conn, ts []tableRows) error {
	return conn.Raw(func(dc any) error {
		for _, t := range ts {
			if len(t.rows) == 0 {
				continue
			}
			if err := s.appendTable(dc.(driver.Conn), t); err != nil {
				return err
			}
			s.hookAt("appended:" + t.table)
		}
		return nil
	})
}

func (s *Infrastore) appendTable(dc driver.Conn, t tableRows) (err error) {
	a, err := duckdb.NewAppender(dc, "", "", t.table)
	if err != nil {
		return fmt.Errorf("appender for %s: %w", t.table, err)
	}
	closed := false
	defer func() {
		if !closed {
			// Also on a panic: free the appender; the transaction it
			// wrote into is rolled back by the caller.
			err = errors.Join(err, a.Close())
		}
	}()
	for i, row := range t.rows {
		if err := a.AppendRow(row...); err != nil {
			return fmt.Errorf("appending to %s: %w", t.table, err)
		}
		if i == len(t.rows)/2 {
			s.hookAt("append:" + t.table)
		}
	}
	closed = true
	if err := a.Close(); err != nil {
		return fmt.Errorf("appending to %s: %w", t.table, err)
	}
	return nil
}

// replaceCurrent writes the new rows of the jobs, tasks and machines a batch
// touched, then deletes their older rows: the new rows have positions after
// prev, the old ones at or before it.
func (s *Infrastore) replaceCurrent(ctx context.Context, conn *sql.Conn, m *model, b *batch, prev int64) error {
	jobs := make([]row, 0, len(b.dirtyJobs))
	for k := range b.dirtyJobs {
		jobs = append(jobs, m.jobRow(k))
	}
	tasks := make([]row, 0, len(b.dirtyTasks))
	for k := range b.dirtyTasks {
		tasks = append(tasks, m.taskRow(k))
	}
	machines := make([]row, 0, len(b.dirtyMachines))
	for k := range b.dirtyMachines {
		machines = append(machines, m.machineRow(k))
	}
	if err := s.appendAll(conn, []tableRows{{"jobs", jobs}, {"tasks", tasks}, {"machines", machines}}); err != nil {
		return err
	}
	for _, d := range []struct {
		table, key string
		n          int
	}{
		{"jobs", "o.user = n.user AND o.job = n.job", len(jobs)},
		{"tasks", "o.user = n.user AND o.job = n.job AND o.task_index = n.task_index", len(tasks)},
		{"machines", "o.machine = n.machine", len(machines)},
	} {
		if d.n == 0 {
			continue
		}
		q := fmt.Sprintf(`DELETE FROM %[1]s o WHERE o.position <= $1 AND EXISTS (SELECT 1 FROM %[1]s n WHERE n.position > $1 AND %[2]s)`, d.table, d.key)
		if _, err := conn.ExecContext(ctx, q, prev); err != nil {
			return fmt.Errorf("replacing rows of %s: %w", d.table, err)
		}
		s.hookAt("replaced:" + d.table)
	}
	return nil
}

// loadModel reads the ingester's state back from the current-state tables.
func loadModel(ctx context.Context, conn *sql.Conn) (*model, error) {
	m := newModel()
	rows, err := conn.QueryContext(ctx, `SELECT user, job, spec_version, status, submit_time, coalesce(end_time, 0), submit_position, time, position FROM jobs`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		js := &jobState{versions: map[int64]jobSpec{}}
		var k jobKey
		var version sql.NullInt64
		var status sql.NullString
		if err := rows.Scan(&k.user, &k.job, &version, &status, &js.submitTime, &js.endTime, &js.since, &js.time, &js.position); err != nil {
			rows.Close()
			return nil, err
		}
		js.version, js.status = version.Int64, status.String
		m.jobs[k] = js
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}

	// The versions of each job since its submission: not those of an
	// earlier job of the same name.
	rows, err = conn.QueryContext(ctx, `SELECT s.user, s.job, s.spec_version, s.position, s.spec::VARCHAR
		FROM job_specs s JOIN jobs j ON j.user = s.user AND j.job = s.job AND s.position >= j.submit_position
		ORDER BY s.position`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k jobKey
		var version, pos int64
		var raw sql.NullString
		if err := rows.Scan(&k.user, &k.job, &version, &pos, &raw); err != nil {
			rows.Close()
			return nil, err
		}
		spec := &events.JobSpec{}
		if raw.Valid {
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(raw.String), spec); err != nil {
				rows.Close()
				return nil, fmt.Errorf("job_specs position %d: %w", pos, err)
			}
		}
		m.jobs[k].versions[version] = jobSpec{spec: spec, position: pos}
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}

	rows, err = conn.QueryContext(ctx, `SELECT user, job, task_index, coalesce(state, ''), coalesce(machine, ''), coalesce(spec_version, 0),
		cpu_reservation_milli, memory_reservation_bytes, disk_reservation_bytes, coalesce(reservation_estimated, false),
		coalesce(restarts, 0), coalesce(pid, 0), coalesce(event_type, -1), coalesce(submit_time, 0), coalesce(start_time, 0), time, position FROM tasks`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		ts := &taskState{}
		var k taskKey
		var rc, rm, rd sql.NullInt64
		var estimated bool
		if err := rows.Scan(&k.user, &k.job, &k.index, &ts.state, &ts.machine, &ts.specVersion, &rc, &rm, &rd, &estimated,
			&ts.restarts, &ts.pid, &ts.eventType, &ts.submitTime, &ts.startTime, &ts.time, &ts.position); err != nil {
			rows.Close()
			return nil, err
		}
		if estimated {
			ts.reservation = &events.Resources{CpuMilli: rc.Int64, MemoryBytes: rm.Int64, DiskBytes: rd.Int64}
		}
		m.tasks[k] = ts
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}

	rows, err = conn.QueryContext(ctx, `SELECT machine, coalesce(address, ''), cpu_milli, memory_bytes, disk_bytes, ports, gpu_milli,
		attributes, state, draining, time, position FROM machines`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		ms := &machineState{capacity: &events.Resources{}}
		var name string
		var attrs any
		c := ms.capacity
		if err := rows.Scan(&name, &ms.address, &c.CpuMilli, &c.MemoryBytes, &c.DiskBytes, &c.Ports, &c.GpuMilli,
			&attrs, &ms.state, &ms.draining, &ms.time, &ms.position); err != nil {
			rows.Close()
			return nil, err
		}
		if proto.Equal(c, &events.Resources{}) {
			ms.capacity = nil
		}
		if am, ok := attrs.(duckdb.Map); ok {
			ms.attributes = make(map[string]string, len(am))
			for k, v := range am {
				ks, _ := k.(string)
				vs, _ := v.(string)
				ms.attributes[ks] = vs
			}
		}
		m.machines[name] = ms
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	return m, nil
}

func closeRows(rows *sql.Rows) error {
	return errors.Join(rows.Err(), rows.Close())
}
