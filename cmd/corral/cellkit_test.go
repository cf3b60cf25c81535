package main_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/internal/testkit"
)

// The test kit of the package's end-to-end tests: the corral binary built
// once, a cell started by `corral up` on free ports (startCell), the
// command line against it, and waiting on what it does.

// cellOptions are what a test asks of its cell; the zero value is a cell
// named dev of corral up's three machines, run by alice.
type cellOptions struct {
	user     string   // $CORRAL_USER, alice when empty
	cell     string   // --cell and $CORRAL_CELL, dev when empty
	agents   int      // --agents, corral up's 3 when 0
	portBase int      // --port-base, a free range when 0
	data     string   // the data dir, a new temporary one when empty
	flags    []string // further flags of corral up
	env      []string // further environment of the cell and its clients
}

// testCell is one cell of a test: where it listens, the environment its
// clients run in, and the `corral up` running it.
type testCell struct {
	bin, root, data             string
	grpcAddr, httpAddr, dnsAddr string
	portBase                    int
	env                         []string // a client's, as the banner's exports set it
	args                        []string // corral up's
	up                          *upProcess
}

// startCell builds the binary (once), starts a cell with opts and waits
// until `corral up` says its machines are in.
func startCell(t *testing.T, opts cellOptions) *testCell {
	t.Helper()
	c := newCell(t, opts)
	c.start(t)
	return c
}

// newCell prepares a cell (binary, data dir, free ports, environment)
// without starting it: for a test that copies files into its data dir
// first, or starts its parts as separate processes.
func newCell(t *testing.T, opts cellOptions) *testCell {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the corral binary and runs a cell")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	c := &testCell{bin: buildCorral(t), root: root, data: opts.data, portBase: opts.portBase}
	if c.data == "" {
		c.data = t.TempDir()
	}
	agents := cmp.Or(opts.agents, 3)
	if c.portBase == 0 {
		c.portBase = freeTaskPorts(t, agents)
	}
	c.grpcAddr, c.httpAddr, c.dnsAddr = testkit.FreeAddr(t), testkit.FreeAddr(t), freeUDPAndTCP(t)
	user, cell := cmp.Or(opts.user, "alice"), cmp.Or(opts.cell, "dev")
	// The client finds the cell's credentials under the data dir, as the
	// banner says (export CORRAL_DATA=...).
	c.env = append(append(os.Environ(), "CORRAL_USER="+user, "CORRAL_MASTER="+c.grpcAddr, "CORRAL_CELL="+cell, "CORRAL_DATA="+c.data), opts.env...)
	c.args = []string{"up", "--data", c.data, "--listen", c.grpcAddr, "--http", c.httpAddr, "--dns", c.dnsAddr, "--port-base", strconv.Itoa(c.portBase)}
	if opts.cell != "" {
		c.args = append(c.args, "--cell", opts.cell)
	}
	if opts.agents != 0 {
		c.args = append(c.args, "--agents", strconv.Itoa(opts.agents))
	}
	c.args = append(c.args, opts.flags...)
	return c
}

// start runs `corral up` with the cell's arguments (again, after a stop
// or kill) and waits until it is up.
func (c *testCell) start(t *testing.T) {
	t.Helper()
	c.up = startUp(t, c.bin, c.root, c.env, c.args)
}

// stop sends `corral up` Ctrl-C and waits for a clean exit.
func (c *testCell) stop(t *testing.T) { c.up.stop(t) }

// kill ends `corral up` by SIGKILL, as a crash would: the master and its
// agents die at once.
func (c *testCell) kill(t *testing.T) {
	t.Helper()
	if err := c.up.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.up.done
	c.up.stopped = true
}

// setFlag gives corral up's flag a new value for the next start.
func (c *testCell) setFlag(t *testing.T, flag, value string) {
	t.Helper()
	i := slices.Index(c.args, flag)
	if i < 0 || i+1 == len(c.args) {
		t.Fatalf("corral up runs without %s", flag)
	}
	c.args[i+1] = value
}

// startProcess runs the binary with args as one part of the cell, its
// output in name.log under the data dir (logged when the test fails), and
// stops it with Ctrl-C at the test's end.
func (c *testCell) startProcess(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir, cmd.Env = c.root, c.env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	log, err := os.Create(filepath.Join(c.data, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s's log:\n%s", name, b)
		}
	})
}

// pid is the process of `corral up`, the master.
func (c *testCell) pid() int { return c.up.cmd.Process.Pid }

// run runs the binary against the cell, quietly.
func (c *testCell) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return runCorral(t, c.root, c.env, 90*time.Second, args...)
}

// cli runs the binary against the cell, logging each command and its
// output as a person would see them.
func (c *testCell) cli(t *testing.T) func(args ...string) (string, int) {
	return c.cliAs(t)
}

// cliAs is cli with more environment (another user's token).
func (c *testCell) cliAs(t *testing.T, env ...string) func(args ...string) (string, int) {
	env = append(slices.Clone(c.env), env...)
	return func(args ...string) (string, int) {
		t.Helper()
		out, code := runCorral(t, c.root, env, 90*time.Second, args...)
		t.Logf("$ corral %s  (exit %d)\n%s", strings.Join(args, " "), code, out)
		return out, code
	}
}

// adminToken is the file holding the token of the admin who made the
// cell.
func (c *testCell) adminToken(user string) string {
	return filepath.Join(c.data, "certs", "admins", user+".token")
}

// webLogin logs in to the cell's web UI with the token in tokenFile.
func (c *testCell) webLogin(t *testing.T, tokenFile string) *http.Client {
	t.Helper()
	return webLogin(t, c.httpAddr, tokenFile)
}

// issueUserTokens gives each user a token of the cell, as `corral token
// issue` does, written to a file for webLogin, and waits until the master
// takes each for its user.
func (c *testCell) issueUserTokens(t *testing.T, users ...string) (tokens, files map[string]string) {
	t.Helper()
	store := auth.NewTokens(filepath.Join(c.data, "certs", auth.TokensFile))
	tokens, files = map[string]string{}, map[string]string{}
	for _, u := range users {
		tok, err := store.Issue(u, auth.RoleUser)
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tok
		files[u] = filepath.Join(t.TempDir(), u+".token")
		if err := os.WriteFile(files[u], []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The master reads the tokens file again within a second of a change.
	for _, u := range users {
		env := append(slices.Clone(c.env), "CORRAL_TOKEN="+tokens[u])
		eventually(t, u+"'s token accepted", 15*time.Second, func() (string, bool) {
			out, code := runCorral(t, c.root, env, 30*time.Second, "whoami")
			return out, code == 0 && strings.HasPrefix(out, u+" ")
		})
	}
	return tokens, files
}

// infrastorePid is the cell's Infrastore process.
func (c *testCell) infrastorePid(t *testing.T) int {
	t.Helper()
	pids := infrastorePids(c.data)
	if len(pids) == 0 {
		t.Fatalf("no Infrastore process of %s", c.data)
	}
	return pids[0]
}

// infrastorePids are the processes of `corral infrastore serve` whose
// arguments name the data dir data.
func infrastorePids(data string) []int {
	return processes(func(_ int, argv []string) bool {
		return len(argv) > 3 && argv[1] == "infrastore" && argv[2] == "serve" && slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, data) })
	})
}

// processes are the pids of this machine's processes whose argv match.
func processes(match func(pid int, argv []string) bool) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(pid, strings.Split(string(b), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// startedPids are the pids of a job's processes by its TaskStarted events.
func startedPids(t *testing.T, corral func(...string) (string, int), job string) []int {
	t.Helper()
	out, code := corral("events", "--job", job, "--type", "TaskStarted")
	if code != 0 {
		t.Fatalf("corral events: exit %d\n%s", code, out)
	}
	var pids []int
	for _, m := range regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

// runCorral runs the binary in dir with env, and returns what it printed
// and its exit code.
func runCorral(t *testing.T, dir string, env []string, within time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, built.bin, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("corral %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

// cliPoll is how often a condition asked through the command line (a
// process, and often a query) is asked again.
const cliPoll = 500 * time.Millisecond

// eventually retries check until it holds, and fails the test with the
// last output when limit passes first.
func eventually(t *testing.T, what string, limit time.Duration, check func() (string, bool)) {
	t.Helper()
	testkit.EventuallyEvery(t, limit, cliPoll, what, func() (bool, string) {
		out, ok := check()
		return ok, out
	})
}

// consistently checks every half second for the whole of during that
// check holds, and fails the test at the first time it does not.
func consistently(t *testing.T, what string, during time.Duration, check func() (string, bool)) {
	t.Helper()
	testkit.Consistently(t, during, cliPoll, what, func() (bool, string) {
		out, ok := check()
		return ok, out
	})
}

// webLogin logs in to a cell's web UI with the token in tokenFile and
// returns a client holding the session.
func webLogin(t *testing.T, httpAddr, tokenFile string) *http.Client {
	t.Helper()
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	web := testkit.NewBrowser(60*time.Second, true)
	base := "http://" + httpAddr
	status, body := testkit.WebLogin(t, web, base, strings.TrimSpace(string(tok)), testkit.LoginCSRF(t, web, base))
	if status != 200 || !strings.Contains(body, `<span id="user">`) {
		t.Fatalf("logging in to the web UI: %d\n%s", status, body)
	}
	return web
}

// webGet is a page of the web UI and its status.
func webGet(t *testing.T, web *http.Client, httpAddr, path string) (string, int) {
	t.Helper()
	resp, err := web.Get("http://" + httpAddr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
	out  []byte
}

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildCorral builds the binary once for all the package's tests: linking
// DuckDB takes most of a minute.
func buildCorral(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		start := time.Now()
		if built.dir, built.err = os.MkdirTemp("", "corral-e2e-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "corral")
		built.out, built.err = exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput()
		t.Logf("built %s in %s", built.bin, time.Since(start).Truncate(time.Millisecond))
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.bin
}

type upProcess struct {
	cmd      *exec.Cmd
	out, err *testkit.SyncBuffer
	done     chan error
	stopped  bool
}

// startUp runs `corral up` and waits until it says the cell is up.
func startUp(t *testing.T, bin, dir string, env, args []string) *upProcess {
	t.Helper()
	p := &upProcess{cmd: exec.Command(bin, args...), out: &testkit.SyncBuffer{}, err: &testkit.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd.Dir, p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = dir, env, p.out, p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	deadline := time.After(60 * time.Second)
	for !strings.Contains(p.out.String(), "Ctrl-C stops the cell") {
		select {
		case err := <-p.done:
			p.stopped = true
			t.Fatalf("corral up exited: %v\nstdout:\n%s\nstderr:\n%s", err, p.out.String(), p.err.String())
		case <-deadline:
			t.Fatalf("corral up did not come up in 60s\nstdout:\n%s\nstderr:\n%s", p.out.String(), p.err.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("$ corral %s\n%s", strings.Join(args, " "), p.out.String())
	return p
}

// stop sends Ctrl-C and waits for a clean exit.
func (p *upProcess) stop(t *testing.T) {
	t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("corral up exited with %v after Ctrl-C\nstderr:\n%s", err, p.err.String())
		}
	case <-time.After(45 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("corral up did not stop within 45s of Ctrl-C\nstderr:\n%s", p.err.String())
	}
	if s := p.err.String(); strings.Contains(s, "level=ERROR") {
		t.Errorf("corral up logged errors:\n%s", s)
	}
}

// freeTaskPorts returns a --port-base for a cell of machines agents (each
// gets 1000 ports from base + 1000 x its index) whose ports nobody on this
// machine listens on: a developer's cell at the default 20000, another test
// run, or what a killed one left behind. A task's health check that found
// someone else's listener would pass when it must not. The ranges stay
// below the kernel's ephemeral ports (32768).
func freeTaskPorts(t *testing.T, machines int) int {
	t.Helper()
	for range 50 {
		base := 20000 + 100*rand.IntN((32768-20000-1000*machines)/100)
		free := true
		for m := 0; m < machines && free; m++ {
			for k := 0; k < 20 && free; k++ {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+1000*m+k))
				if err != nil {
					free = false
					break
				}
				l.Close()
			}
		}
		if free {
			return base
		}
	}
	t.Fatal("no free range of task ports below 32768")
	return 0
}

// freeUDPAndTCP is a port free for both, as the name service needs.
func freeUDPAndTCP(t *testing.T) string {
	t.Helper()
	for i := 0; i < 20; i++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := pc.LocalAddr().String()
		l, err := net.Listen("tcp", addr)
		pc.Close()
		if err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no port free for both UDP and TCP")
	return ""
}
