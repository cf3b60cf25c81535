package infrastore

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/shareddata"
)

// googleTraceDir is the public sample of the Google trace (never copied
// into the repository).
func googleTraceDir(t *testing.T) string {
	return shareddata.Dir(t, shareddata.GoogleTrace)
}

// traceFigures are counted straight from the gzipped CSV files, with a
// parser that shares nothing with the importer.
type traceFigures struct {
	rows     int64
	byType   map[string]int64 // event type code -> rows
	byUser   map[string]int64
	jobs     map[string]bool
	machines map[string]bool
}

func countTrace(t *testing.T, pattern string, typeField, userField, jobField, machineField int) traceFigures {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s", pattern)
	}
	f := traceFigures{byType: map[string]int64{}, byUser: map[string]int64{}, jobs: map[string]bool{}, machines: map[string]bool{}}
	for _, path := range files {
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(fh)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(zr)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ",")
			f.rows++
			f.byType[fields[typeField]]++
			f.byUser[fields[userField]]++
			f.jobs[fields[jobField]] = true
			if machineField >= 0 && fields[machineField] != "" {
				f.machines[fields[machineField]] = true
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		zr.Close()
		fh.Close()
	}
	return f
}

func TestImportGoogleTrace(t *testing.T) {
	dir := googleTraceDir(t)
	tasks := countTrace(t, filepath.Join(dir, "task_events", "*.csv.gz"), 5, 6, 2, 4)
	jobs := countTrace(t, filepath.Join(dir, "job_events", "*.csv.gz"), 3, 4, 2, -1)

	s := openStore(t, Options{})
	ctx := context.Background()
	st, err := s.ImportGoogleTrace(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.TaskEvents != tasks.rows || st.JobEvents != jobs.rows {
		t.Fatalf("imported %+v, the files hold %d task and %d job events", st, tasks.rows, jobs.rows)
	}
	// Importing again replaces, never doubles (a second import of the whole
	// sample: make test's, not -short's).
	if !testing.Short() {
		if _, err := s.ImportGoogleTrace(ctx, dir); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []struct {
		table string
		want  traceFigures
	}{{"task_events", tasks}, {"job_events", jobs}} {
		t.Run(c.table, func(t *testing.T) {
			src := fmt.Sprintf("source = '%s'", GoogleTraceSource)
			got := map[string]int64{}
			for _, r := range rowsOf(t, s, `SELECT event_type, count(*) FROM `+c.table+` WHERE `+src+` GROUP BY ALL`) {
				var code string
				var n int64
				fmt.Sscanf(strings.Replace(r, ",", " ", 1), "%s %d", &code, &n)
				got[code] = n
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want.byType) {
				t.Errorf("%s: rows per event type %v, the files say %v", c.table, got, c.want.byType)
			}
			if n := queryInt(t, s, `SELECT count(DISTINCT job) FROM `+c.table+` WHERE `+src); n != int64(len(c.want.jobs)) {
				t.Errorf("%s: %d distinct jobs, the files say %d", c.table, n, len(c.want.jobs))
			}
			users := rowsOf(t, s, `SELECT user, count(*) FROM `+c.table+` WHERE `+src+` GROUP BY ALL ORDER BY ALL`)
			var want []string
			for u, n := range c.want.byUser {
				want = append(want, fmt.Sprintf("%s,%d", u, n))
			}
			sort.Strings(want)
			if strings.Join(users, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s: %d users by SQL, %d in the files, or their counts differ", c.table, len(users), len(want))
			}
		})
	}
	if n := queryInt(t, s, `SELECT count(DISTINCT machine) FROM task_events WHERE source = ?`, GoogleTraceSource); n != int64(len(tasks.machines)) {
		t.Errorf("%d distinct machines, the files say %d", n, len(tasks.machines))
	}
	// The figures the trace's README gives for this sample.
	if tasks.rows != 919_519 || jobs.rows != 25_437 || tasks.byType["0"] != 359_630 || tasks.byType["5"] != 55_483 || len(tasks.machines) != 12_508 {
		t.Logf("note: this sample differs from the README's figures: %d task events, %d job events", tasks.rows, jobs.rows)
	}
	// State at a time works on the trace: one hour in.
	if n := queryInt(t, s, `SELECT count(*) FROM tasks_at(make_timestamp(3600000000)) WHERE source = ?`, GoogleTraceSource); n == 0 {
		t.Error("tasks_at one hour into the trace is empty")
	}
}

// writeTrace writes a tiny trace of n task events of our own making and
// imports it.
func writeTrace(t *testing.T, s *Infrastore, n int) {
	t.Helper()
	dir := t.TempDir()
	var task, job strings.Builder
	for i := range n {
		fmt.Fprintf(&task, "%d,,42,%d,7,%d,userhash,2,9,0.125,0.0625,0.001,0\n", 600_000_000+i, i, i%2)
	}
	job.WriteString("600000000,,42,0,userhash,2,namehash,logicalhash\n")
	writeGz(t, filepath.Join(dir, "task_events", "part-00000-of-00001.csv.gz"), task.String())
	writeGz(t, filepath.Join(dir, "job_events", "part-00000-of-00001.csv.gz"), job.String())
	if _, err := s.ImportGoogleTrace(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
}

func writeGz(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(zw.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

func TestImportGoogleTraceBadInput(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	writeTrace(t, s, 2)
	for _, c := range []struct {
		name, task, want string
	}{
		{"bad time", "x,,42,0,7,0,u,2,9,0.1,0.1,0.1,0\n", `line 2: field 1 (time): "x" is not an integer`},
		{"bad code", "1,,42,0,7,9,u,2,9,0.1,0.1,0.1,0\n", "line 2: field 6 (event type): 9 is not a code 0-8"},
		{"bad cpu", "1,,42,0,7,0,u,2,9,lots,0.1,0.1,0\n", `line 2: field 10 (CPU request): "lots" is not a number`},
		{"short line", "1,,42,0,7,0,u\n", "wrong number of fields"},
		{"bad flag", "1,,42,0,7,0,u,2,9,0.1,0.1,0.1,2\n", `field 13 (different-machines restriction): "2" is not 0 or 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeGz(t, filepath.Join(dir, "task_events", "part-00000-of-00001.csv.gz"), "1,,42,0,7,0,u,2,9,0.1,0.1,0.1,0\n"+c.task)
			_, err := s.ImportGoogleTrace(ctx, dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
			}
		})
	}
	if _, err := s.ImportGoogleTrace(ctx, t.TempDir()); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty dir: %v, want ErrInvalid", err)
	}
	// A failed import changed nothing: the earlier one is still there.
	if n := queryInt(t, s, `SELECT count(*) FROM task_events WHERE source = ?`, GoogleTraceSource); n != 2 {
		t.Errorf("after failed imports: %d trace rows, want the 2 of the last good import", n)
	}
}
