package testkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ProcStatus reads a kB field of /proc/PID/status (VmRSS:, VmHWM:), or of
// this process's when pid is 0.
func ProcStatus(pid int, field string) (int64, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", path, field)
}

// ProcStatusKB is ProcStatus failing the test or benchmark on an error.
func ProcStatusKB(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	n, err := ProcStatus(pid, field)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
