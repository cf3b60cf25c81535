package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/agent"
)

// An agent of a cell with certificates serves /metrics, whose series name
// users and jobs, only to the bearer token its --metrics-token-file holds;
// without one, to no one. /healthz and /readyz name no one and stay open.
// The agent run here is the one `corral agent` runs (agentRun).
func TestAgentMetricsAskForTheScrapeToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "scrape.token")
	if err := os.WriteFile(file, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readScrapeToken(file); err == nil || !strings.Contains(err.Error(), "--metrics-token-file") || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("a short token: %v, want a refusal naming the flag", err)
	}
	if _, err := readScrapeToken(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "--metrics-token-file") {
		t.Fatalf("a missing file: %v", err)
	}
	const token = "0123456789abcdef0123456789abcdef"
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := readScrapeToken(file)
	if err != nil || tok != token {
		t.Fatalf("readScrapeToken: %q, %v", tok, err)
	}

	for _, c := range []struct {
		name  string
		token string
		want  map[string]int // Authorization header -> status of /metrics
	}{
		{"with a token", token, map[string]int{"": 401, "Bearer wrong": 401, "Bearer " + token: 200, "bearer " + token: 200, token: 401, "Basic " + token: 401}},
		{"without one", "", map[string]int{"": 401, "Bearer " + token: 401, "Bearer ": 401}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			addr := make(chan string, 1)
			r := &agentRun{cfg: agent.Config{Name: "m1", ListenAddr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "agent"), Cgroups: "sampling",
				OnHTTPListen: func(a string) { addr <- a }},
				http: "127.0.0.1:0", metricsToken: c.token, guardMetrics: true, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			done := make(chan error, 1)
			go func() { done <- r.run(ctx) }()
			defer func() { cancel(); <-done }()
			var base string
			select {
			case a := <-addr:
				base = "http://" + a
			case err := <-done:
				t.Fatalf("the agent stopped: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the agent served no HTTP in 30s")
			}
			get := func(path, authz string) (int, string) {
				req, _ := http.NewRequest("GET", base+path, nil)
				if authz != "" {
					req.Header.Set("Authorization", authz)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			for authz, want := range c.want {
				code, body := get("/metrics", authz)
				if code != want {
					t.Errorf("/metrics with %q: %d, want %d\n%s", authz, code, want, body)
				}
				if want == 200 && !strings.Contains(body, "corral_agent_info") {
					t.Errorf("/metrics with the token holds no agent series:\n%s", body)
				}
				if want == 401 && !strings.Contains(body, "--metrics-token-file") {
					t.Errorf("/metrics refused without naming the flag: %s", body)
				}
			}
			if code, _ := get("/healthz", ""); code != 200 {
				t.Errorf("/healthz without a token: %d, want 200", code)
			}
		})
	}
}

// A token file without --certs would guard nothing (an agent without
// certificates obeys anyone): refused, naming the flags.
func TestMetricsTokenFileNeedsCerts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scrape.token")
	if err := os.WriteFile(file, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "agent", "--name", "m1", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--metrics-token-file", file)
	if code != ExitUsage || !strings.Contains(stderr, "--metrics-token-file") || !strings.Contains(stderr, "--certs") {
		t.Fatalf("exit %d, want a usage error naming --metrics-token-file and --certs:\n%s", code, stderr)
	}
}
