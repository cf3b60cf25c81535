package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/commands/auth"
)

// issueUserTokens gives each user a token of the cell in data, written to
// a file for webLogin, and waits for the master to read them.
func issueUserTokens(t *testing.T, data string, users ...string) (tokens, files map[string]string) {
	t.Helper()
	store := auth.NewTokens(filepath.Join(data, "certs", auth.TokensFile))
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
	time.Sleep(time.Second) // the master reads the tokens file again within a second of a change
	return tokens, files
}

// simChildren are the what-if replays (corral sim children) of process
// parent.
func simChildren(parent int) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		if args := strings.Split(readFile(filepath.Join("/proc", d.Name(), "cmdline")), "\x00"); len(args) > 1 && args[1] == "sim" {
			out = append(out, pid)
		}
	}
	return out
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestWhatIfRunsOutsideTheMaster: the web UI's what-if page replays in a
// child process bounded in memory and time, never in the master. A replay
// that adds 400,000 machines (it once grew the master from 66 MB to 1.6
// GB) is stopped at its memory and said so, naming the flag; meanwhile the
// same user's second replay is refused naming the cap, another user's is
// answered, and the master's resident memory hardly moves. A viewer who
// leaves stops their replay's process. A cell with a short time limit
// stops a long replay at it and says so.
func TestWhatIfRunsOutsideTheMaster(t *testing.T) {
	bin := buildCorral(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
	admin := append(os.Environ(), "CORRAL_USER=root", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+data)
	upArgs := []string{"up", "--data", data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr,
		"--port-base", strconv.Itoa(freeTaskPorts(t, 3)), "--sim-memory", "128MiB", "--sim-timeout", "90s"}
	up := startUp(t, bin, root, admin, upArgs)
	if out, code := runCorral(t, bin, root, admin, "job", "submit", "examples/hello.jsonnet", "--wait"); code != 0 {
		t.Fatalf("submitting hello: exit %d\n%s", code, out)
	}
	_, files := issueUserTokens(t, data, "alice", "bob")
	alice, bob := webLogin(t, httpAddr, files["alice"]), webLogin(t, httpAddr, files["bob"])
	get := func(ctx context.Context, c *http.Client, query string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+httpAddr+"/sim?run=1&"+query, nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	ctx := context.Background()
	if code, body, err := get(ctx, bob, ""); err != nil || code != 200 || !strings.Contains(body, `id="sim-summary"`) {
		t.Fatalf("a small replay: %d %v\n%s", code, err, body)
	}

	pid := up.cmd.Process.Pid
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the master's peak: %v", err)
	}
	before := procStatusKB(t, pid, "VmRSS:")
	huge := "add=100000x8c32g+100000x8c32g+100000x8c32g+100000x8c32g"
	var wg sync.WaitGroup
	wg.Add(1)
	var hugeCode int
	var hugeBody string
	start := time.Now()
	go func() {
		defer wg.Done()
		hugeCode, hugeBody, _ = get(ctx, alice, huge)
	}()
	for len(simChildren(pid)) == 0 && time.Since(start) < 30*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	kids := simChildren(pid)
	if len(kids) == 0 {
		t.Fatal("the huge replay started no child process of the master")
	}
	// The store's URL (which may hold a password) is not in any child's
	// argv, which every user of the machine may read.
	for _, p := range append(kids, infrastorePid(t, data)) {
		if cmd := readFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.Contains(cmd, "--store") || strings.Contains(cmd, "events.db") {
			t.Errorf("process %d's argv names the store: %q", p, strings.ReplaceAll(cmd, "\x00", " "))
		}
	}
	// Alice's second replay is refused while her first runs; bob's is
	// answered.
	if code, body, _ := get(ctx, alice, ""); code != http.StatusTooManyRequests || !strings.Contains(body, "--sim-per-user") {
		t.Errorf("alice's second replay: %d, want 429 naming --sim-per-user\n%s", code, body)
	}
	if code, body, err := get(ctx, bob, ""); err != nil || code != 200 || !strings.Contains(body, `id="sim-summary"`) {
		t.Errorf("bob's replay beside alice's huge one: %d %v\n%s", code, err, body)
	}
	wg.Wait()
	if hugeCode != http.StatusBadRequest || !strings.Contains(hugeBody, "--sim-memory") {
		t.Errorf("the huge replay: %d, want 400 naming --sim-memory\n%s", hugeCode, hugeBody)
	}
	peak := procStatusKB(t, pid, "VmHWM:")
	t.Logf("the huge replay ended in %s; the master's resident memory: %d MiB before, peak %d MiB", time.Since(start).Round(time.Millisecond), before>>10, peak>>10)
	if grew := peak - before; grew > 64<<10 {
		t.Errorf("the master's resident memory grew %d MiB during the huge replay, want it to stay in the child", grew>>10)
	}

	// A viewer who leaves stops their replay.
	leave, cancel := context.WithCancel(ctx)
	go func() {
		for len(simChildren(pid)) == 0 && leave.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	if _, _, err := get(leave, alice, "add=100000x8c32g"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the replay the viewer left: %v, want it canceled", err)
	}
	left := time.Now()
	for len(simChildren(pid)) > 0 {
		if time.Since(left) > 5*time.Second {
			t.Fatalf("the replay's process %v still runs 5s after its viewer left", simChildren(pid))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the replay's process was gone %s after its viewer left", time.Since(left).Round(time.Millisecond))
	// Its slot is free again once the master has seen her go.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, body, err := get(ctx, alice, "")
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) || code != http.StatusTooManyRequests {
			t.Fatalf("alice's replay after she left one: %d %v\n%s", code, err, body)
		}
	}
	up.stop(t)

	// A cell whose replays may take a second stops a longer one at it.
	for i, a := range upArgs {
		if a == "--sim-timeout" {
			upArgs[i+1] = "1s"
		}
	}
	for i, a := range upArgs {
		if a == "--sim-memory" {
			upArgs[i+1] = "1GiB"
		}
	}
	startUp(t, bin, root, admin, upArgs)
	alice = webLogin(t, httpAddr, files["alice"])
	code, body, err := get(ctx, alice, "add=100000x8c32g+100000x8c32g")
	if err != nil || code != http.StatusGatewayTimeout || !strings.Contains(body, "--sim-timeout") {
		t.Errorf("a replay past its time: %d %v, want 504 naming --sim-timeout\n%s", code, err, body)
	}
}
