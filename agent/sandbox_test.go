package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
)

// searchableDir returns a data dir whose ancestors others may search, as
// tasks running as other users need (t.TempDir is 0700).
func searchableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running tasks as other users needs root")
	}
}

// testUIDs is a range of uids no account on a test machine uses.
func testUIDs() UIDRange {
	return UIDRange{First: 3_000_000 + uint32(os.Getpid()%1000)*100, Count: 100}
}

func owner(t *testing.T, path string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	return sys.Uid, sys.Gid, st.Mode().Perm()
}

// TestRealTasksCannotReadEachOther runs two real tasks, each as its own
// uid: the second tries to read the first's files, logs, environment and
// to signal it, and is refused every time; each reads its own.
func TestRealTasksCannotReadEachOther(t *testing.T) {
	needRoot(t)
	uids := testUIDs()
	ra := newRealAgent(t, func(c *Config) {
		c.DataDir = searchableDir(t)
		c.TaskUIDs = uids
	})
	a, b := ref("a", 0), ref("b", 0)
	ra.start(a, sh(`echo a-file-secret > "$HOME/secret"; echo a-log-secret; cat "$HOME/secret" >&2; echo own-log: $(cat ../logs/stdout); exec sleep 30`,
		func(s *agentpb.TaskSpec) { s.Env = map[string]string{"A_TOKEN": "a-env-secret"} }))
	tsA := ra.wait(a, 5*time.Second, func(ts *agentpb.TaskStatus) bool {
		b, _ := os.ReadFile(filepath.Join(ts.Sandbox, "logs", "stderr"))
		o, _ := os.ReadFile(filepath.Join(ts.Sandbox, "logs", "stdout"))
		return strings.Contains(string(b), "a-file-secret") && strings.Contains(string(o), "own-log:") && ts.Pid != 0
	}, "wrote its secret and read its own log")
	sb := tsA.Sandbox
	probe := fmt.Sprintf(`
		echo uid=$(id -u) gid=$(id -g) groups=$(id -G)
		cat %[1]s/work/secret && echo READ-FILE
		cat %[1]s/logs/stdout && echo READ-LOG
		ls %[1]s && echo LISTED-SANDBOX
		tr '\0' '\n' < /proc/%[2]d/environ && echo READ-ENV
		kill -0 %[2]d && echo SIGNALLED
		touch %[1]s/work/planted && echo PLANTED
		echo probe-done`, sb, tsA.Pid)
	ra.start(b, sh(probe))
	tsB := ra.waitState(b, finished, 5*time.Second)
	out, errs := readLog(t, tsB, "stdout"), readLog(t, tsB, "stderr")
	t.Logf("task b's probe:\n%s%s", out, errs)
	for _, leak := range []string{"a-file-secret", "a-log-secret", "a-env-secret", "READ-FILE", "READ-LOG", "LISTED-SANDBOX", "READ-ENV", "SIGNALLED", "PLANTED"} {
		if strings.Contains(out+errs, leak) {
			t.Errorf("task b got at task a's %q:\nstdout:\n%s\nstderr:\n%s", leak, out, errs)
		}
	}
	if n := strings.Count(errs, "Permission denied") + strings.Count(errs, "Operation not permitted"); n < 5 {
		t.Errorf("want 5 refusals (file, log, listing, environ, signal, plant), stderr:\n%s", errs)
	}
	if !strings.Contains(out, "probe-done") {
		t.Errorf("the probe did not run to its end:\n%s", out)
	}
	// Each ran as a uid of the range, not root, with no extra groups.
	var uidB, gidB int
	fmt.Sscanf(out, "uid=%d gid=%d", &uidB, &gidB)
	uidA, _, _ := owner(t, filepath.Join(sb, "work"))
	if uidB < int(uids.First) || uidB >= int(uids.First+uids.Count) || uint32(uidB) == uidA || gidB != uidB {
		t.Errorf("task b ran as uid %d gid %d; task a owns its work dir as %d; range %v", uidB, gidB, uidA, uids)
	}
	if !strings.Contains(out, fmt.Sprintf("groups=%d\n", gidB)) {
		t.Errorf("task b has groups other than its own: %s", out)
	}
	// Task a reads its own file and log.
	if errA := readLog(t, tsA, "stderr"); !strings.Contains(errA, "a-file-secret") {
		t.Errorf("task a could not read its own file: %q", errA)
	}
	// (What it reads back starts with the agent's run marker.)
	if outA := readLog(t, tsA, "stdout"); !regexp.MustCompile(`own-log: (` + regexp.QuoteMeta(RunMarker) + `1 started \S+ --- )?a-log-secret`).MatchString(outA) {
		t.Errorf("task a could not read its own log: %q", outA)
	}
	checkSandboxModes(t, ra, sb, uidA)
}

// checkSandboxModes: the owners and modes that keep a task's sandbox sb
// (task a's, owned by uidA) and the agent's state from other tasks.
func checkSandboxModes(t *testing.T, ra *realAgent, sb string, uidA uint32) {
	for _, c := range []struct {
		path     string
		uid, gid uint32
		mode     os.FileMode
	}{
		{sb, 0, uidA, 0o750},
		{filepath.Join(sb, "logs"), 0, uidA, 0o750},
		{filepath.Join(sb, "logs", "stdout"), 0, uidA, 0o640},
		{filepath.Join(sb, "work"), uidA, uidA, 0o700},
		{filepath.Join(sb, "tmp"), uidA, uidA, 0o700},
		{filepath.Dir(sb), 0, 0, 0o711},
		{filepath.Join(ra.cfg.DataDir, "tasks"), 0, 0, 0o711},
	} {
		t.Run(c.path, func(t *testing.T) {
			uid, gid, mode := owner(t, c.path)
			if uid != c.uid || gid != c.gid || mode != c.mode {
				t.Errorf("%s: %d:%d %v, want %d:%d %v", c.path, uid, gid, mode, c.uid, c.gid, c.mode)
			}
		})
	}
	for _, f := range stateFiles {
		if _, _, mode := owner(t, filepath.Join(ra.cfg.DataDir, f)); mode != 0o600 {
			t.Errorf("state file %s has mode %v: it holds secrets", f, mode)
		}
	}
}

// TestRealForgottenTaskUIDIsRetired: once the master forgets a task, its
// sandbox is closed to its uid and whatever still runs as that uid (a
// process that escaped its container) is killed, so the uid can be given
// to the next task safely.
func TestRealForgottenTaskUIDIsRetired(t *testing.T) {
	needRoot(t)
	uids := UIDRange{First: testUIDs().First, Count: 1}
	ra := newRealAgent(t, func(c *Config) {
		c.DataDir = searchableDir(t)
		c.TaskUIDs = uids
	})
	r := ref("escape", 0)
	ra.start(r, sh("exit 0"))
	ts := ra.waitState(r, finished, 5*time.Second)
	// A process left running as the task's uid, outside any container.
	left := exec.Command("sleep", "60")
	left.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uids.First, Gid: uids.First}}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	t.Cleanup(func() { _ = left.Process.Kill() })
	// The only uid is taken until the task is forgotten.
	ra.seq++
	st, err := ra.Poll(t.Context(), &agentpb.PollRequest{MasterId: "test", Epoch: 1, Cell: "cc", Requests: []*agentpb.Request{
		StartRequest("s-full", ref("other", 0), 1, 0, sh("true"))}})
	if err != nil || len(st.Results) != 1 || !strings.Contains(st.Results[0].Error, "no free task uid") {
		t.Fatalf("start with no free uid: %v %v", st.GetResults(), err)
	}
	ra.poll(ForgetRequest("f1", r))
	uid, gid, mode := owner(t, ts.Sandbox)
	if uid != 0 || gid != 0 || mode != 0o700 {
		t.Errorf("retired sandbox is %d:%d %v, want 0:0 0700", uid, gid, mode)
	}
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
		t.Fatalf("the process of the retired uid still runs")
	}
	// The uid is free again.
	other := ref("other", 0)
	ra.start(other, sh("id -u"))
	tsO := ra.waitState(other, finished, 5*time.Second)
	if got := strings.TrimSpace(readLog(t, tsO, "stdout")); got != strconv.Itoa(int(uids.First)) {
		t.Errorf("the next task ran as %s", got)
	}
}

func TestTaskUserConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"uid zero", func(c *Config) { c.TaskUIDs = UIDRange{First: 0, Count: 10} }, "Config.TaskUIDs"},
		{"root user", func(c *Config) { c.TaskUser = "root" }, "must not run as root"},
		{"no such user", func(c *Config) { c.TaskUser = "no-such-user-corral" }, "Config.TaskUser"},
		{"unsearchable data dir", func(c *Config) { c.DataDir = t.TempDir() + "/data"; c.TaskUIDs = testUIDs() }, "cannot reach their sandboxes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if os.Geteuid() != 0 {
				c.want = "only root can run tasks as other users"
			}
			cfg := Config{Name: "m1", DataDir: t.TempDir(), Capacity: &events.Resources{MemoryBytes: 1 << 30}}
			c.cfg(&cfg)
			_, err := cfg.withDefaults()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestRealTaskUserRunsTasksUnprivileged: with one TaskUser every task runs
// as that user, not root, in a sandbox only that user's group can enter.
func TestRealTaskUserRunsTasksUnprivileged(t *testing.T) {
	needRoot(t)
	cred, err := lookupTaskUser("nobody")
	if err != nil {
		t.Skip("no user nobody here")
	}
	ra := newRealAgent(t, func(c *Config) {
		c.DataDir = searchableDir(t)
		c.TaskUser = "nobody"
	})
	r := ref("who", 0)
	ra.start(r, sh(`id -u; cat /etc/shadow && echo READ-SHADOW; echo x > "$HOME/own" && echo WROTE-OWN`))
	ts := ra.waitState(r, finished, 5*time.Second)
	out := readLog(t, ts, "stdout")
	if !strings.HasPrefix(out, strconv.Itoa(int(cred.uid))+"\n") || strings.Contains(out, "READ-SHADOW") || !strings.Contains(out, "WROTE-OWN") {
		t.Errorf("the task's output:\n%s%s", out, readLog(t, ts, "stderr"))
	}
	if uid, gid, mode := owner(t, ts.Sandbox); uid != 0 || gid != cred.gid || mode != 0o750 {
		t.Errorf("sandbox %d:%d %v", uid, gid, mode)
	}
}
