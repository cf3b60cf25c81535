package infrastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/events"
)

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
