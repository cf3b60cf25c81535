package webui_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
)

// The task page reads logs as the API does: through the master's Service
// and a real agent, for the task's owner and admins only (bob is refused
// alice's logs on the page and on the live stream), and under the same
// caps on streams open at once, which the live events page shares.
func TestWebLogsFollowTheAPIsRule(t *testing.T) {
	c, base := startLogsUI(t)
	get := func(b *http.Client, path string) (int, string) { return getWith(t, b, base+path) }
	alice, bob, root := logIn(t, base, "tok-alice"), logIn(t, base, "tok-bob"), logIn(t, base, "tok-root")
	const page, live = "/jobs/alice/web/tasks/0", "/jobs/alice/web/tasks/0/logs/stdout"

	if code, body := get(alice, page); code != 200 || !strings.Contains(body, aliceSecret) {
		t.Errorf("alice's own task page: %d, want her log line in it:\n%s", code, body)
	}
	if code, body := get(root, page); code != 200 || !strings.Contains(body, aliceSecret) {
		t.Errorf("an admin's view of alice's task: %d, want the log line in it", code)
	}
	code, body := get(bob, page)
	if code != 200 || strings.Contains(body, aliceSecret) || !strings.Contains(body, "bob may read only their own tasks&#39; logs, not alice&#39;s") {
		t.Errorf("bob's view of alice's task: %d, want no log and the reason:\n%s", code, body)
	}
	if code, body := get(bob, live); code != http.StatusForbidden || strings.Contains(body, aliceSecret) || !strings.Contains(body, "bob may read only their own tasks' logs") {
		t.Errorf("bob following alice's stdout: %d %q, want 403 with the reason", code, body)
	}
	// An earlier run's page keeps the same rule.
	if code, body := get(bob, page+"/runs/0"); code != http.StatusForbidden || strings.Contains(body, aliceSecret) || !strings.Contains(body, "bob may read only their own tasks&#39; logs") {
		t.Errorf("bob reading alice's run 0: %d, want 403 with the reason:\n%s", code, body)
	}
	if code, body := get(alice, page+"/runs/0"); code != 200 || !strings.Contains(body, aliceSecret) {
		t.Errorf("alice reading her run 0 (her task's only run): %d, want its log line:\n%s", code, body)
	}
	checkLiveStreamHoldsTheSlot(t, c, base, alice, page, live)
}

// aliceSecret is what alice/web/0 printed: a line only she should read.
const aliceSecret = "the session key of alice is 42"

// startLogsUI serves the web UI of a cell where alice/web/0 ran on m0, an
// agent with its log, to the users of the tokens tok-alice, tok-bob and
// tok-root (an admin); alice may hold one stream at a time.
func startLogsUI(t *testing.T) (*testCell, string) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	data := t.TempDir()
	ag, err := agent.New(agent.Config{Name: "m0", DataDir: data, Cgroups: "sampling", MemoryLowWater: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ag.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	agentpb.RegisterAgentServer(g, ag)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	// alice/web/0 ran on m0, and printed a line only she should read.
	logs := filepath.Join(data, "tasks", "alice", "web", "0", "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logs, "stdout"), []byte(aliceSecret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &history{}
	h.add(events.MachineStream("m0"), &events.MachineRegistered{Machine: "m0", Address: lis.Addr().String(), Capacity: res(4000, 8*gib)})
	h.job("alice", "web", 9, 1, res(500, 256<<20), nil)
	h.run("alice", "web", 0, "m0")
	c := openCell(t, h.evs)
	c.svc.Logs = api.NewAgentLogs(c.m, nil)
	t.Cleanup(c.svc.Logs.Close)
	c.svc.StreamCaps = &auth.StreamCaps{PerUser: 1, Total: 10}

	tokens := map[string]auth.Identity{
		"tok-alice": {Name: "alice", Role: auth.RoleUser, Via: "token"},
		"tok-bob":   {Name: "bob", Role: auth.RoleUser, Via: "token"},
		"tok-root":  {Name: "root", Role: auth.RoleAdmin, Via: "token"},
	}
	ui, err := webui.New(webui.Config{API: c.svc, Cell: c.m, Logs: c.svc, Logger: quiet,
		Login: func(_ context.Context, tok string) (auth.Identity, error) {
			if id, ok := tokens[tok]; ok {
				return id, nil
			}
			return auth.Identity{}, errors.New("unknown token")
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui)
	t.Cleanup(srv.Close)
	t.Cleanup(ui.Close)
	return c, srv.URL
}

// logIn is a browser logged in to the UI at base with tok.
func logIn(t *testing.T, base, tok string) *http.Client {
	t.Helper()
	b := testkit.NewBrowser(10*time.Second, true)
	if status, body := testkit.WebLogin(t, b, base, tok, testkit.LoginCSRF(t, b, base)); status != 200 {
		t.Fatalf("login with %s: %d\n%s", tok, status, body)
	}
	return b
}

// getWith gets u as browser b: the status and the body.
func getWith(t *testing.T, b *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// checkLiveStreamHoldsTheSlot: alice follows her stdout; the stream holds
// her one slot, so her page's tail and a second stream are refused, naming
// the cap, until she leaves.
func checkLiveStreamHoldsTheSlot(t *testing.T, c *testCell, base string, alice *http.Client, page, live string) {
	get := func(b *http.Client, path string) (int, string) { return getWith(t, b, base+path) }
	ctx, leave := context.WithTimeout(context.Background(), 10*time.Second)
	defer leave()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+live, nil)
	resp, err := alice.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("alice following her stdout: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "retry:") {
		t.Fatalf("the live stream did not start: %q", sc.Text())
	}
	// held: alice's one slot is taken (a probe that got one gives it back).
	held := func() bool {
		release, err := c.svc.StreamCaps.Open("alice")
		if err != nil {
			return true
		}
		release()
		return false
	}
	testkit.Eventually(t, 5*time.Second, "alice's live stream holds a slot", func() (bool, string) { return held(), "her slot is free" })
	if _, body := get(alice, page); strings.Contains(body, aliceSecret) || !strings.Contains(body, "--max-streams-per-user 1") {
		t.Errorf("alice's page while her stream is open: want the cap per user named, not the log")
	}
	// A live view of the events is a long call too: the same cap.
	evReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events/stream", nil)
	evResp, err := alice.Do(evReq)
	if err != nil {
		t.Fatal(err)
	}
	evBody, _ := io.ReadAll(evResp.Body) // the failure ends the stream
	evResp.Body.Close()
	if !strings.Contains(string(evBody), "event: failure") || !strings.Contains(string(evBody), "--max-streams-per-user 1") {
		t.Errorf("alice's live events while her log stream is open: %q, want a failure naming the cap per user", evBody)
	}
	// The reader leaves: the slot comes back, and the page reads again.
	leave()
	resp.Body.Close()
	testkit.Eventually(t, 5*time.Second, "alice's slot is given back when her browser leaves", func() (bool, string) { return !held(), "her slot is held" })
	if _, body := get(alice, page); !strings.Contains(body, aliceSecret) {
		t.Errorf("alice's page after her stream ended: no log line")
	}
}
