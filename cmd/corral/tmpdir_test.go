package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A `corral up` killed with SIGKILL leaves nothing in the system's temp
// directory: the Infrastore's socket lives beside its file under the data
// dir, and the next `corral up` on that data dir replaces it and answers
// SQL. A data dir too deep for a unix socket's path (108 bytes) works the
// same way.
func TestKilledUpLeavesNothingInTmp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the corral binary and runs a cell")
	}
	bin := buildCorral(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, deep := range []bool{false, true} {
		name := "short data dir"
		if deep {
			name = "data dir too deep for a socket path"
		}
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			if deep {
				data = filepath.Join(data, strings.Repeat("d", 60), strings.Repeat("e", 60))
			}
			if sock := filepath.Join(data, "infrastore.duckdb.sock"); deep != (len(sock) > 107) {
				t.Fatalf("socket path %s is %d bytes: the case is not the one named", sock, len(sock))
			}
			tmp := t.TempDir()
			grpcAddr, httpAddr, dnsAddr := freeTCP(t), freeTCP(t), freeUDPAndTCP(t)
			env := append(os.Environ(), "TMPDIR="+tmp, "CORRAL_USER=alice", "CORRAL_MASTER="+grpcAddr, "CORRAL_CELL=dev", "CORRAL_DATA="+data)
			args := []string{"up", "--data", data, "--listen", grpcAddr, "--http", httpAddr, "--dns", dnsAddr,
				"--port-base", strconv.Itoa(freeTaskPorts(t, 1)), "--agents", "1"}
			sql := func(when string) {
				t.Helper()
				// The Infrastore starts beside the master: give it a few seconds.
				var out string
				var code int
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
					if out, code = runCorral(t, bin, root, env, "sql", "-o", "csv", "SELECT 41 + 1 AS answer"); code == 0 && strings.Contains(out, "42") {
						return
					}
				}
				t.Fatalf("%s: corral sql: exit %d\n%s", when, code, out)
			}
			up := startUp(t, bin, root, env, args)
			sql("first start")
			if err := up.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-up.done
			up.stopped = true
			// The Infrastore process dies with it (its parent-death signal);
			// give the kernel a moment to reap it.
			time.Sleep(500 * time.Millisecond)
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Errorf("after kill -9, TMPDIR holds %v: want nothing outside the data dir", names)
			}
			up = startUp(t, bin, root, env, args)
			sql("after kill -9 and a restart")
			up.stop(t)
			if _, err := os.Stat(filepath.Join(data, "infrastore.duckdb.sock")); !os.IsNotExist(err) {
				t.Errorf("after Ctrl-C the socket is still there: %v", err)
			}
		})
	}
}
