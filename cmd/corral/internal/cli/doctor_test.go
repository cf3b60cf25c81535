package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

func runAsRoot(ctx context.Context, args ...string) (int, string, string) {
	var out, errb testkit.SyncBuffer
	code := Main(ctx, args, Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == "CORRAL_USER" {
			return "root"
		}
		return ""
	}})
	return code, out.String(), errb.String()
}

// `corral master` serves /metrics, /readyz and JSON logs, and `corral
// doctor` finds it healthy; with no master, the doctor fails and says how
// to start one; a debug address off loopback is refused before anything
// starts.
func TestMasterOperationsAndDoctor(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "events.db")
	grpcAddr, httpAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)

	code, _, stderr := runAsRoot(context.Background(), "master", "--insecure", "--store", store, "--listen", grpcAddr, "--debug-addr", "0.0.0.0:6060")
	if code != ExitUsage || !strings.Contains(stderr, "loopback address only") {
		t.Fatalf("master --debug-addr 0.0.0.0:6060: exit %d, %s", code, stderr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var logs testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"master", "--insecure", "--store", store, "--name", "m1", "--listen", grpcAddr, "--http", httpAddr, "--log-format", "json"},
			Env{Stdout: io.Discard, Stderr: &logs})
	}()
	defer func() {
		cancel()
		<-done
	}()
	testkit.Eventually(t, 15*time.Second, "/readyz answers 200", func() (bool, string) {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false, fmt.Sprintf("%v\n%s", err, logs.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200, fmt.Sprintf("%d %s\n%s", resp.StatusCode, body, logs.String())
	})
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"corral_master_leader 1", "corral_events_appended_total{type=\"LeaderElected\"} 1", "corral_store_up 1"} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if !strings.Contains(logs.String(), `"msg":"leading"`) {
		t.Errorf("no JSON log record of leading:\n%s", logs.String())
	}

	code, out, stderr := runAsRoot(context.Background(), "doctor", "--master", grpcAddr, "--store", store, "--data", dir)
	if code != ExitOK || !strings.Contains(out, "m1 leads (epoch 1)") || !strings.Contains(out, "no machine is registered") {
		t.Errorf("doctor on a healthy master: exit %d\n%s%s", code, out, stderr)
	}

	code, out, _ = runAsRoot(context.Background(), "doctor", "--master", testkit.FreeAddr(t), "--check-timeout", "2s")
	if code != ExitFailed || !strings.Contains(out, "no master answers") || !strings.Contains(out, "fix: start the cell") {
		t.Errorf("doctor with no master: exit %d\n%s", code, out)
	}
}
