package infrastore

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/events/sqlitestore"
)

// crash is what the hook panics with to stop the ingester dead.
type crash struct{ point string }

// referenceDigest ingests the log once, cleanly, into a fresh file.
func referenceDigest(t *testing.T, r *sqlitestore.Store) map[string]string {
	t.Helper()
	s := openStore(t, Options{})
	if _, err := s.CatchUp(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return digest(t, s)
}

// TestExactlyOnceCrashHook stops the ingester at random steps of random
// batches, by panicking (a crash: no code of the ingester runs after it but
// deferred cleanup) or by cancelling its context, then restarts it, with
// and without reopening the file. Whatever the moment, the end result must
// be the clean ingestion's, row for row.
func TestExactlyOnceCrashHook(t *testing.T) {
	evs := cellHistory(4, 2000)
	store := newSQLiteLog(t, evs)
	want := referenceDigest(t, store)

	path := filepath.Join(t.TempDir(), "crashy.duckdb")
	rng := rand.New(rand.NewPCG(4, 4))
	crashes := map[string]int{}
	total := 0
	const target = 60 // crashes before the ingester is let finish
	// Crashes go on until there were target of them, some mid-batch and
	// some at the position or the commit, whatever the log's shape.
	enough := func() bool {
		mid := 0
		for p, n := range crashes {
			if strings.HasPrefix(p, "append:") || strings.HasPrefix(p, "appended:") || strings.HasPrefix(p, "replaced:") {
				mid += n
			}
		}
		return total >= target && mid > 0 && crashes["position"]+crashes["commit"] > 0
	}
	var s *Infrastore
	for attempt := 0; ; attempt++ {
		if attempt > 2000 {
			t.Fatal("ingestion never finished")
		}
		if s == nil || rng.IntN(2) == 0 {
			if s != nil {
				s.Close()
			}
			var err error
			if s, err = Open(context.Background(), path, Options{BatchSize: 20 + rng.IntN(100)}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		odds := 5 + rng.IntN(30)
		s.hook = func(point string) {
			if enough() || rng.IntN(odds) != 0 {
				return
			}
			crashes[point]++
			total++
			if rng.IntN(2) == 0 {
				cancel()
				return
			}
			panic(crash{point})
		}
		pos, err := func() (pos int64, err error) {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(crash); !ok {
						panic(r)
					}
					err = errors.New("crashed")
				}
			}()
			return s.CatchUp(ctx, store)
		}()
		cancel()
		if err == nil && pos == int64(len(evs)) {
			break
		}
	}
	s.hook = nil
	defer s.Close()
	mid := 0
	for p, n := range crashes {
		if strings.HasPrefix(p, "append:") || strings.HasPrefix(p, "appended:") || strings.HasPrefix(p, "replaced:") {
			mid += n
		}
	}
	if mid == 0 || crashes["position"]+crashes["commit"] == 0 {
		t.Fatalf("crashes did not land mid-batch and before the commit: %v", crashes)
	}
	t.Logf("crashes by step: %v", crashes)
	checkIngested(t, s, evs)
	compareDigests(t, digest(t, s), want)
}

// Environment of the ingester subprocess of TestExactlyOnceKill9.
const (
	envChildLog = "INFRASTORE_TEST_CHILD_LOG"
	envChildDB  = "INFRASTORE_TEST_CHILD_DB"
)

// TestIngesterChild is the subprocess TestExactlyOnceKill9 starts and kills:
// it ingests the log with small batches and a pause mid-batch, so that a
// SIGKILL often lands inside a transaction.
func TestIngesterChild(t *testing.T) {
	logPath, dbPath := os.Getenv(envChildLog), os.Getenv(envChildDB)
	if logPath == "" {
		t.Skip("run by TestExactlyOnceKill9")
	}
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, logPath, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := Open(ctx, dbPath, Options{BatchSize: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.hook = func(point string) {
		if strings.HasPrefix(point, "append:") {
			// The pause is the subject: it holds each batch open long
			// enough that the parent's SIGKILL lands inside one.
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := s.CatchUp(ctx, store); err != nil {
		t.Fatal(err)
	}
}

// TestExactlyOnceKill9 runs the ingester in a subprocess and kills it with
// SIGKILL at random moments; after every kill the file must hold a prefix
// of the log exactly once, and in the end all of it, as a clean run would.
func TestExactlyOnceKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	evs := cellHistory(5, 3200)
	store := newSQLiteLog(t, evs)
	want := referenceDigest(t, store)
	dbPath := filepath.Join(t.TempDir(), "killed.duckdb")
	rng := rand.New(rand.NewPCG(5, 5))
	kills := 0
	// A loaded machine (the race detector, other tests) can keep the child
	// from ingesting anything before the kill: each round that made no
	// progress gives the next one longer, so the test ends on any machine.
	var lastPos int64
	var patience time.Duration
	for round := 0; ; round++ {
		if round > 200 {
			t.Fatal("the child never finished")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestIngesterChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envChildLog+"="+store.Path(), envChildDB+"="+dbPath)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		killed := false
		select {
		case err = <-done:
		case <-time.After(time.Duration(150+rng.IntN(600))*time.Millisecond + patience):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			err = <-done
			killed = true
		}
		if !killed && err != nil {
			t.Fatalf("child failed: %v\n%s", err, out)
		}
		if killed {
			kills++
		}
		// After every stop, the file holds positions 1..p exactly once.
		s, oerr := Open(context.Background(), dbPath, Options{})
		if oerr != nil {
			t.Fatalf("reopening after kill %d: %v", kills, oerr)
		}
		p, _ := s.Position(context.Background())
		n := queryInt(t, s, `SELECT count(*) FROM events`)
		d := queryInt(t, s, `SELECT count(DISTINCT position) FROM events WHERE position BETWEEN 1 AND ?`, p)
		s.Close()
		if n != p || d != p {
			t.Fatalf("after kill %d: position %d, %d event rows, %d distinct positions", kills, p, n, d)
		}
		if !killed || p == int64(len(evs)) {
			break
		}
		if p == lastPos {
			patience += 250 * time.Millisecond
		}
		lastPos = p
	}
	if kills == 0 {
		t.Fatal("the child finished before any kill; nothing was tested")
	}
	t.Logf("%d kills", kills)
	s, err := Open(context.Background(), dbPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CatchUp(context.Background(), store); err != nil {
		t.Fatal(err)
	}
	checkIngested(t, s, evs)
	compareDigests(t, digest(t, s), want)
}
