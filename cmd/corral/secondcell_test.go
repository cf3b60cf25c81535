package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// secondCellFlags are what a cell beside another needs of its own: its
// data dir, its three addresses (the agents follow the API's) and its
// task ports.
var secondCellFlags = []string{"--data", "--listen", "--http", "--dns", "--port-base"}

// secondCellLine finds `corral up --data ...` in text and returns its
// flags' names, nil when there is no such line.
func secondCellLine(text string) []string {
	m := regexp.MustCompile(`(?m)^\s*(?:\$ )?corral up (--data \S+(?: --[a-z-]+ \S+)*)\s*$`).FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	var flags []string
	for _, f := range strings.Fields(m[1]) {
		if strings.HasPrefix(f, "--") {
			flags = append(flags, f)
		}
	}
	return flags
}

// runSecondCell starts a second cell beside first, as the README's walk
// and first's banner say (the same flags, here with free values, and one
// machine to keep it short), and checks that both answer and that neither
// touches the other's tasks, the second's stop included. first runs hello.
func runSecondCell(t *testing.T, first *testCell) {
	t.Helper()
	secondCellFlagsAsDocumented(t, first)
	firstCLI := first.cli(t)
	before := helloPids(t, firstCLI)
	portBase := freeTaskPorts(t, 1)
	for portBase+1000 > first.portBase && portBase < first.portBase+3000 {
		portBase = freeTaskPorts(t, 1)
	}
	second := startCell(t, cellOptions{agents: 1, portBase: portBase})
	secondCLI := second.cli(t)

	out, code := secondCLI("job", "submit", "examples/hello.jsonnet", "--wait")
	if code != 0 || !strings.Contains(out, "alice/hello: all 5 tasks running") {
		t.Errorf("the second cell: submit hello --wait: exit %d", code)
	}
	out, _ = secondCLI("task", "list", "hello")
	if n := len(regexp.MustCompile(`(?m)^hello/[0-4]\s+running\s+-\s+m1\s`).FindAllString(out, -1)); n != 5 {
		t.Errorf("the second cell runs %d of hello's tasks on its m1, want 5", n)
	}
	// Each answers for its own jobs: web runs in the first only.
	if out, code := firstCLI("job", "list"); code != 0 || !strings.Contains(out, "alice/web") || !strings.Contains(out, "alice/hello") {
		t.Errorf("the first cell's job list beside the second: exit %d", code)
	}
	if out, code := secondCLI("job", "list"); code != 0 || strings.Contains(out, "alice/web") || !strings.Contains(out, "alice/hello") {
		t.Errorf("the second cell's job list: exit %d, want hello alone", code)
	}

	firstUntouched(t, firstCLI, before, "with the second cell up")
	secondPids := helloPids(t, secondCLI)
	second.stop(t) // Ctrl-C stops the second cell's tasks, and only those
	for _, pid := range secondPids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("the second cell's task process %d still runs after its Ctrl-C", pid)
		}
	}
	firstUntouched(t, firstCLI, before, "after the second cell stopped")
}

// secondCellFlagsAsDocumented: the README's walk and the first cell's
// banner start a second cell with the flags it needs of its own.
func secondCellFlagsAsDocumented(t *testing.T, first *testCell) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(first.root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	walk := string(readme)
	if i := strings.Index(walk, "## Using corral: the newcomer path"); i >= 0 {
		walk = walk[i:]
	}
	if got := secondCellLine(walk); !slices.Equal(got, secondCellFlags) {
		t.Errorf("the README's walk starts a second cell with the flags %v, want %v", got, secondCellFlags)
	}
	if got := secondCellLine(first.up.out.String()); !slices.Equal(got, secondCellFlags) {
		t.Errorf("corral up's banner names a second cell with the flags %v, want %v", got, secondCellFlags)
	}
}

// firstUntouched: hello's processes in the first cell (before) still run,
// none was failed, killed, lost or evicted, and none started again.
func firstUntouched(t *testing.T, firstCLI func(...string) (string, int), before []int, when string) {
	t.Helper()
	for _, pid := range before {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("%s: the first cell's task process %d is gone: %v", when, pid, err)
		}
	}
	out, _ := firstCLI("events", "--job", "hello")
	for _, bad := range []string{"TaskFailed", "TaskKilled", "TaskLost", "TaskEvicted"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: the first cell recorded %s", when, bad)
		}
	}
	if after := helloPids(t, firstCLI); len(after) != len(before) {
		t.Errorf("%s: the first cell started hello's tasks %d times, before %d", when, len(after), len(before))
	}
}
