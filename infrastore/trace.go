package infrastore

import (
	"compress/gzip"
	"context"
	"database/sql/driver"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// ImportStats counts what ImportGoogleTrace loaded.
type ImportStats struct {
	Files      int
	TaskEvents int64
	JobEvents  int64
}

// ImportGoogleTrace loads the task_events and job_events tables of the
// public Google cluster trace (clusterdata-2011-2: gzipped CSV files without
// a header, dir/task_events/*.csv.gz and dir/job_events/*.csv.gz) into
// task_events and job_events as the history of a cell, with source
// GoogleTraceSource. Files are read in name order and rows keep their order
// as position, so tasks_at and jobs_at work on them too (times are the
// trace's microseconds: tasks_at(make_timestamp(3600000000)) is one hour
// into the trace). Values keep the trace's units (normalised resources,
// hashed names). An import replaces the previous one, in one transaction: a
// malformed file leaves the store as it was.
func (s *Infrastore) ImportGoogleTrace(ctx context.Context, dir string) (ImportStats, error) {
	var st ImportStats
	if s.closed.Load() {
		return st, ErrClosed
	}
	if s.opts.ReadOnly {
		return st, ErrReadOnly
	}
	if dir == "" {
		return st, fmt.Errorf("%w: dir: must not be empty", ErrInvalid)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return st, fmt.Errorf("%w: dir: %s is not a readable directory", ErrInvalid, dir)
	}
	taskFiles, _ := filepath.Glob(filepath.Join(dir, "task_events", "*.csv.gz"))
	jobFiles, _ := filepath.Glob(filepath.Join(dir, "job_events", "*.csv.gz"))
	sort.Strings(taskFiles)
	sort.Strings(jobFiles)
	if len(taskFiles)+len(jobFiles) == 0 {
		return st, fmt.Errorf("%w: dir: no task_events/*.csv.gz or job_events/*.csv.gz in %s", ErrInvalid, dir)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return st, err
	}
	defer conn.Close()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err = inTx(ctx, conn, func() error {
		for _, t := range []string{"task_events", "job_events"} {
			if _, err := conn.ExecContext(ctx, "DELETE FROM "+t+" WHERE source = ?", GoogleTraceSource); err != nil {
				return err
			}
		}
		return conn.Raw(func(dc any) error {
			n, err := importFiles(ctx, dc.(driver.Conn), "task_events", taskFiles, 13, taskEventRow)
			st.TaskEvents = n
			if err != nil {
				return err
			}
			n, err = importFiles(ctx, dc.(driver.Conn), "job_events", jobFiles, 8, jobEventRow)
			st.JobEvents = n
			return err
		})
	})
	if err != nil {
		return ImportStats{}, fmt.Errorf("infrastore: import of the Google trace: %w", err)
	}
	st.Files = len(taskFiles) + len(jobFiles)
	return st, nil
}

// importFiles appends every record of files to table, numbering them from 1.
func importFiles(ctx context.Context, dc driver.Conn, table string, files []string, fields int,
	toRow func(rec []string, pos int64) (row, error)) (n int64, err error) {
	if len(files) == 0 {
		return 0, nil
	}
	a, err := duckdb.NewAppender(dc, "", "", table)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, a.Close()) }()
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if err := readGzipCSV(path, fields, func(line int, rec []string) error {
			r, err := toRow(rec, n+1)
			if err != nil {
				return fmt.Errorf("%s line %d: %w", path, line, err)
			}
			n++
			return a.AppendRow(r...)
		}); err != nil {
			return n, err
		}
	}
	return n, nil
}

// readGzipCSV calls fn with every record of a gzipped CSV file.
func readGzipCSV(path string, fields int, fn func(line int, rec []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer zr.Close()
	cr := csv.NewReader(zr)
	cr.FieldsPerRecord = fields
	cr.ReuseRecord = true
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := fn(line, rec); err != nil {
			return err
		}
	}
}

// Field parsers: an empty field is a NULL, as in the trace.

func intField(rec []string, i int, name string) (any, error) {
	if rec[i] == "" {
		return nil, nil
	}
	v, err := strconv.ParseInt(rec[i], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("field %d (%s): %q is not an integer", i+1, name, rec[i])
	}
	return v, nil
}

func floatField(rec []string, i int, name string) (any, error) {
	if rec[i] == "" {
		return nil, nil
	}
	v, err := strconv.ParseFloat(rec[i], 64)
	if err != nil {
		return nil, fmt.Errorf("field %d (%s): %q is not a number", i+1, name, rec[i])
	}
	return v, nil
}

func strField(rec []string, i int) any {
	if rec[i] == "" {
		return nil
	}
	return rec[i]
}

func requiredInt(rec []string, i int, name string) (int64, error) {
	v, err := intField(rec, i, name)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, fmt.Errorf("field %d (%s): must not be empty", i+1, name)
	}
	return v.(int64), nil
}

func eventType(rec []string, i int) (int64, error) {
	code, err := requiredInt(rec, i, "event type")
	if err == nil && (code < 0 || code > 8) {
		err = fmt.Errorf("field %d (event type): %d is not a code 0-8", i+1, code)
	}
	return code, err
}

func taskEventRow(rec []string, pos int64) (row, error) {
	var errs []error
	must := func(v any, err error) any {
		errs = append(errs, err)
		return v
	}
	t, err := requiredInt(rec, 0, "time")
	errs = append(errs, err)
	job, err := requiredInt(rec, 2, "job ID")
	errs = append(errs, err)
	index, err := requiredInt(rec, 3, "task index")
	errs = append(errs, err)
	code, err := eventType(rec, 5)
	errs = append(errs, err)
	var diff any
	switch rec[12] {
	case "":
	case "0":
		diff = false
	case "1":
		diff = true
	default:
		errs = append(errs, fmt.Errorf("field 13 (different-machines restriction): %q is not 0 or 1", rec[12]))
	}
	r := row{
		t, must(intField(rec, 1, "missing info")), strconv.FormatInt(job, 10), int32(index), strField(rec, 4), int32(code),
		strField(rec, 6), must(intField(rec, 7, "scheduling class")), must(intField(rec, 8, "priority")),
		must(floatField(rec, 9, "CPU request")), must(floatField(rec, 10, "memory request")), must(floatField(rec, 11, "disk request")),
		diff, GoogleTraceSource, pos, nil, stateOfCode(int(code)), nil, nil, nil, nil,
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

func jobEventRow(rec []string, pos int64) (row, error) {
	var errs []error
	t, err := requiredInt(rec, 0, "time")
	errs = append(errs, err)
	missing, err := intField(rec, 1, "missing info")
	errs = append(errs, err)
	job, err := requiredInt(rec, 2, "job ID")
	errs = append(errs, err)
	code, err := eventType(rec, 3)
	errs = append(errs, err)
	class, err := intField(rec, 5, "scheduling class")
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return row{
		t, missing, strconv.FormatInt(job, 10), int32(code), strField(rec, 4), class, strField(rec, 6), strField(rec, 7),
		GoogleTraceSource, pos, nil, nil, nil, nil, nil,
	}, nil
}
