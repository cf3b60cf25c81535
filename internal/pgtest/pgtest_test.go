package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/corralhq/corral/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func show(t testing.TB, c *pgx.Conn, setting string) string {
	t.Helper()
	var v string
	if err := c.QueryRow(context.Background(), "SHOW "+setting).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The binary's shared server is private (not a given server's), fast, and
// each test's database is its own and gone after it.
func TestNewDatabaseOnThePrivateServer(t *testing.T) {
	if os.Getenv(EnvServerURL) != "" {
		t.Skipf("%s points the tests at a given server", EnvServerURL)
	}
	var name string
	t.Run("db", func(t *testing.T) {
		c := connect(t, NewDatabase(t))
		if err := c.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(context.Background(), "CREATE TABLE t (x int)"); err != nil {
			t.Fatal(err)
		}
		for _, s := range fastSettings {
			k, v, _ := strings.Cut(s, "=")
			if got := show(t, c, k); got != v {
				t.Errorf("%s = %s on the shared server, want %s", k, got, v)
			}
		}
	})
	srv := shared.srv
	if srv == nil || srv.port == 5432 {
		t.Fatalf("the shared server is %+v, want a private one on a port of its own", srv)
	}
	if _, err := os.Stat(filepath.Join(srv.Dir(), fmt.Sprintf(".s.PGSQL.%d", srv.port))); err != nil {
		t.Errorf("the unix socket is not in the server's directory: %v", err)
	}
	c := connect(t, srv.URL())
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Errorf("database %s after its test ended: %d, %v; want dropped", name, n, err)
	}
}

// A benchmark run's shared server keeps PostgreSQL's durability settings,
// so that its figures stand for a real server.
func TestBenchmarkRunGetsADurableServer(t *testing.T) {
	if os.Getenv(EnvServerURL) != "" {
		t.Skipf("%s points the tests at a given server", EnvServerURL)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkHelperSharedSettings$", "-test.benchtime=1x")
	cmd.Env = append(os.Environ(), helperEnv+"=bench")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "shared server: fsync=on synchronous_commit=on full_page_writes=on") {
		t.Errorf("a benchmark run: %v, want its shared server durable:\n%s", err, out)
	}
}

// BenchmarkHelperSharedSettings is not a benchmark: a test runs the binary
// again to have it say how the shared server of a benchmark run is set.
func BenchmarkHelperSharedSettings(b *testing.B) {
	if os.Getenv(helperEnv) != "bench" {
		b.Skip("a helper of TestBenchmarkRunGetsADurableServer")
	}
	c := connect(b, NewDatabase(b))
	fmt.Printf("shared server: fsync=%s synchronous_commit=%s full_page_writes=%s\n",
		show(b, c, "fsync"), show(b, c, "synchronous_commit"), show(b, c, "full_page_writes"))
}

// A durable server stopped at once keeps every committed row, runs on the
// same port after Start, not as root, and Close leaves no process and no
// directory.
func TestServerStopStartClose(t *testing.T) {
	s, err := StartServer(Options{Durable: true})
	if errors.Is(err, ErrNoBinaries) || errors.Is(err, ErrNoAccount) {
		lacking(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		if got := show(t, c, k); got != "on" {
			t.Errorf("%s = %s on a durable server, want on", k, got)
		}
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept SELECT generate_series(1, 1000)"); err != nil {
		t.Fatal(err)
	}
	pid := s.running.Process.Pid
	if uid := processUID(t, pid); uid == 0 {
		t.Errorf("postgres runs as root")
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx); err == nil {
		t.Error("a connection survived Stop")
	}
	if processAlive(pid) {
		t.Errorf("postmaster %d runs on after Stop", pid)
	}
	if err := s.Stop(); err == nil {
		t.Error("Stop of a stopped server succeeded")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c2 := connect(t, s.URL())
	var n int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 1000 {
		t.Errorf("after an immediate stop and a start: %d rows, %v; want 1000", n, err)
	}
	if err := s.Start(); err == nil {
		t.Error("Start of a running server succeeded")
	}

	pid, dir := s.running.Process.Pid, s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Errorf("postmaster %d runs on after Close", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s after Close: %v", dir, err)
	}
	if left := processesIn(dir); len(left) > 0 {
		t.Errorf("processes in %s after Close: %v", dir, left)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// helperEnv makes the test binary, run again, a helper of the test that
// ran it.
const helperEnv = "CORRAL_PGTEST_HELPER"

// TestHelperServer is not a test: a test runs the binary again to be it.
// It starts a server, says where, and waits to be killed.
func TestHelperServer(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "server":
		s, err := StartServer(Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("server", s.Dir(), s.running.Process.Pid, s.dog.cmd.Process.Pid)
		// Until the test kills this process.
		killed, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		<-killed.Done()
	case "database":
		NewDatabase(t)
	}
}

func helper(t *testing.T, role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServer$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
	return cmd
}

// A test binary killed with SIGKILL (as a timeout or an operator would)
// leaves no postgres process and no directory: the watchdog stops the
// server and removes them.
func TestKilledBinaryLeavesNothing(t *testing.T) {
	cmd := helper(t, "server")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	var pid, dog int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "error" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the helper could not start a server: %s", sc.Text())
		}
		if len(f) == 4 && f[0] == "server" {
			dir = f[1]
			pid, _ = strconv.Atoi(f[2])
			dog, _ = strconv.Atoi(f[3])
			break
		}
	}
	if dir == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the helper said nothing of its server")
	}
	if !processAlive(pid) || len(processesIn(dir)) < 2 {
		t.Fatalf("postmaster %d alive %v, processes in %s: %v; want it and its children", pid, processAlive(pid), dir, processesIn(dir))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	testkit.Eventually(t, 30*time.Second, "the server's directory and processes go after the kill", func() (bool, string) {
		_, statErr := os.Stat(dir)
		left := processesIn(dir)
		return os.IsNotExist(statErr) && len(left) == 0 && !processAlive(pid) && !processAlive(dog),
			fmt.Sprintf("%s stat %v, processes in it %v, postmaster %d alive %v, watchdog %d alive %v",
				dir, statErr, left, pid, processAlive(pid), dog, processAlive(dog))
	})
}

// Without server binaries, NewDatabase fails under CI=true and skips
// otherwise, saying what to install, either way.
func TestNoBinaries(t *testing.T) {
	empty := t.TempDir()
	for _, ci := range []string{"true", ""} {
		cmd := helper(t, "database", EnvBinaries+"="+empty, "CI="+ci, EnvServerURL+"=")
		out, err := cmd.CombinedOutput()
		if !strings.Contains(string(out), Install) || !strings.Contains(string(out), empty) {
			t.Errorf("CI=%q: the output does not say to run %q nor name %s:\n%s", ci, Install, empty, out)
		}
		if ci == "true" && (err == nil || !strings.Contains(string(out), "--- FAIL: TestHelperServer")) {
			t.Errorf("CI=true: %v, want a failure:\n%s", err, out)
		}
		if ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP: TestHelperServer")) {
			t.Errorf("outside CI: %v, want a skip:\n%s", err, out)
		}
	}
}

// FindBinaries prefers PATH, then the newest version under the globs, over
// generated layouts of installed versions.
func TestFindBinaries(t *testing.T) {
	install := func(dir string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, tool := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, tool), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, versions := range [][]int{{15}, {9, 13}, {16, 10, 15}, {17, 9, 12, 14}} {
		t.Run(fmt.Sprint(versions), func(t *testing.T) {
			root := t.TempDir()
			newest := 0
			for _, v := range versions {
				install(filepath.Join(root, "lib", strconv.Itoa(v), "bin"))
				newest = max(newest, v)
			}
			// A directory with initdb alone does not count.
			lone := filepath.Join(root, "lib", "99", "bin")
			os.MkdirAll(lone, 0o755)
			os.WriteFile(filepath.Join(lone, "initdb"), []byte("#!/bin/sh\n"), 0o755)
			globs := []string{filepath.Join(root, "lib", "*", "bin"), filepath.Join(root, "pgsql-*", "bin")}
			got, err := findBinaries([]string{filepath.Join(root, "nothing")}, globs)
			if want := filepath.Join(root, "lib", strconv.Itoa(newest), "bin"); err != nil || got != want {
				t.Errorf("versions %v: %s, %v; want %s", versions, got, err, want)
			}
			install(filepath.Join(root, "pgsql-99", "bin"))
			if got, _ := findBinaries(nil, globs); got != filepath.Join(root, "pgsql-99", "bin") {
				t.Errorf("versions %v and pgsql-99: %s, want pgsql-99's", versions, got)
			}
			onPath := filepath.Join(root, "path")
			install(onPath)
			if got, _ := findBinaries([]string{"", lone, onPath}, globs); got != onPath {
				t.Errorf("versions %v with %s on PATH: %s", versions, onPath, got)
			}
		})
	}
	_, err := findBinaries(nil, []string{filepath.Join(t.TempDir(), "*", "bin")})
	if !errors.Is(err, ErrNoBinaries) || !strings.Contains(err.Error(), Install) {
		t.Errorf("nothing installed: %v, want ErrNoBinaries saying %q", err, Install)
	}
}

func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie has exited; only its parent has not reaped it yet.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func processUID(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[1])
			return uid
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return -1
}

// processesIn lists the live processes whose working directory is dir or
// under it: a postmaster and its children work in the data directory.
func processesIn(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) && processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
