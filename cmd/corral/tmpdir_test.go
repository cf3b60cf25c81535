package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testkit"
)

// A `corral up` killed with SIGKILL leaves nothing in the system's temp
// directory: the Infrastore's socket lives beside its file under the data
// dir, and the next `corral up` on that data dir replaces it and answers
// SQL. A data dir too deep for a unix socket's path (108 bytes) works the
// same way.
func TestKilledUpLeavesNothingInTmp(t *testing.T) {
	for _, deep := range []bool{false, true} {
		name := "short data dir"
		if deep {
			name = "data dir too deep for a socket path"
		}
		t.Run(name, func(t *testing.T) { killedUpLeavesNothingInTmp(t, deep) })
	}
}

func killedUpLeavesNothingInTmp(t *testing.T, deep bool) {
	data := t.TempDir()
	if deep {
		data = filepath.Join(data, strings.Repeat("d", 60), strings.Repeat("e", 60))
	}
	if sock := filepath.Join(data, "infrastore.duckdb.sock"); deep != (len(sock) > 107) {
		t.Fatalf("socket path %s is %d bytes: the case is not the one named", sock, len(sock))
	}
	tmp := t.TempDir()
	c := startCell(t, cellOptions{agents: 1, data: data, env: []string{"TMPDIR=" + tmp}})
	// The Infrastore starts beside the master: give it a few seconds.
	sql := func(when string) {
		t.Helper()
		eventually(t, when+": corral sql answers", 30*time.Second, func() (string, bool) {
			out, code := c.run(t, "sql", "-o", "csv", "SELECT 41 + 1 AS answer")
			return out, code == 0 && strings.Contains(out, "42")
		})
	}
	sql("first start")
	c.kill(t)
	// The Infrastore process dies with it (its parent-death signal), once
	// the kernel has reaped it.
	testkit.Eventually(t, 10*time.Second, "the Infrastore process ends with corral up", func() (bool, string) {
		pids := infrastorePids(c.data)
		return len(pids) == 0, fmt.Sprint(pids, " still run")
	})
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("after kill -9, TMPDIR holds %v: want nothing outside the data dir", names)
	}
	c.start(t)
	sql("after kill -9 and a restart")
	c.stop(t)
	if _, err := os.Stat(filepath.Join(data, "infrastore.duckdb.sock")); !os.IsNotExist(err) {
		t.Errorf("after Ctrl-C the socket is still there: %v", err)
	}
}
