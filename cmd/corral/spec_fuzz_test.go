package main_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/cmd/corral/internal/jobfile"
	"github.com/corralhq/corral/commands"
)

var fuzzFormats = []string{"jsonnet", "yaml", "json"}

// FuzzJobFile feeds arbitrary bytes to the job-file decoder as Jsonnet,
// YAML and JSON: it never panics, a refusal is a *jobfile.Error whose every
// problem has a reason, and every job it accepts is the caller's and passes
// the master's validation. The seed corpus is in
// testdata/fuzz/FuzzJobFile.
func FuzzJobFile(f *testing.F) {
	f.Add(uint8(0), []byte(`{name: "web", count: 2, command: "/bin/server", resources: {cpu: 0.5, memory: "256Mi"}}`))
	f.Add(uint8(1), []byte("name: web\ncount: 1\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n"))
	f.Add(uint8(2), []byte(`{"jobs": [{"name": "a", "count": 1, "command": "x", "resources": {"cpu": 1, "memory": "1Gi"}}]}`))
	f.Fuzz(func(t *testing.T, format uint8, data []byte) {
		path := "job." + fuzzFormats[int(format)%len(fuzzFormats)]
		file, err := jobfile.Decode(path, data, jobfile.Options{User: "alice", Timeout: 2 * time.Second, MaxStack: 200})
		if err != nil {
			var je *jobfile.Error
			if !errors.As(err, &je) || len(je.Problems) == 0 {
				t.Fatalf("refusal %T %v is not a *jobfile.Error with problems", err, err)
			}
			for _, p := range je.Problems {
				if p.Reason == "" {
					t.Fatalf("a problem without a reason: %+v", p)
				}
			}
			return
		}
		for _, j := range file.Jobs {
			if j.User != "alice" {
				t.Fatalf("job %q runs as %q, not the caller", j.Name, j.User)
			}
			if err := commands.ValidateSpec(j); err != nil {
				t.Fatalf("an accepted job does not validate: %v", err)
			}
		}
	})
}

// jsonnetChildEnv makes the test binary evaluate one Jsonnet program (in
// TestHelperJsonnetEval) and exit: an evaluation past its time limit cannot
// be interrupted, only abandoned, so it runs in a process of its own.
const jsonnetChildEnv = "CORRAL_TEST_JSONNET_PROGRAM"

// TestHelperJsonnetEval is not a test: run with jsonnetChildEnv set, it
// evaluates the program with a 500 ms limit, prints the outcome and exits.
func TestHelperJsonnetEval(t *testing.T) {
	prog := os.Getenv(jsonnetChildEnv)
	if prog == "" {
		return
	}
	start := time.Now()
	_, err := jobfile.Decode("never.jsonnet", []byte(prog), jobfile.Options{User: "alice", Timeout: 500 * time.Millisecond})
	fmt.Printf("after %v: %v\n", time.Since(start).Round(100*time.Millisecond), err)
	os.Exit(0)
}

// TestJsonnetThatNeverEndsIsStopped: a program that recurses without end
// hits the stack bound, one that loops without growing the stack hits the
// time limit; each is a clear error about the file, within the limit. The
// peak memory of each is logged: the time limit bounds it only as far as
// the evaluation can allocate in that time (some hundreds of MiB in 500 ms
// here).
func TestJsonnetThatNeverEndsIsStopped(t *testing.T) {
	for _, c := range []struct {
		name, prog, says string
	}{
		{"deep recursion", `local f(n) = 1 + f(n + 1); f(0)`, "max stack frames exceeded"},
		{"endless tail call", `local f(n) = f(n + 1) tailstrict; f(0)`, "Jsonnet evaluation took longer than 500ms"},
		{"endless comprehension", `local f(n) = if n < 0 then [] else f(n + 1) tailstrict; {name: "x", count: std.length(f(0))}`, "took longer than 500ms"},
		{"memory hungry", `local f(a) = f(a + a) tailstrict; f(["x"])`, "took longer than 500ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperJsonnetEval$")
			cmd.Env = append(os.Environ(), jsonnetChildEnv+"="+c.prog)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("the evaluation did not end: %s", out)
			}
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				first, _, _ := strings.Cut(string(out), "\n")
				t.Logf("%s (the evaluating process peaked at %d MiB)", first, ru.Maxrss>>10)
			}
			if err != nil || !strings.Contains(string(out), c.says) || !strings.Contains(string(out), "never.jsonnet") {
				t.Errorf("%v: %s; want an error about never.jsonnet saying %q", err, out, c.says)
			}
		})
	}
}
