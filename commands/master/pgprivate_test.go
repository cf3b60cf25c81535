package master_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// privatePG is a PostgreSQL server of the test's own, so that the test can
// stop it without stopping the machine's shared server other tests use.
type privatePG struct {
	t       *testing.T
	bin     string
	dir     string // data directory
	sock    string // unix socket directory
	port    int
	cred    *syscall.Credential
	logPath string
}

// pgBin is where Debian's PostgreSQL 15 keeps initdb and pg_ctl.
const pgBin = "/usr/lib/postgresql/15/bin"

// newPrivatePG initialises a cluster in a temporary directory and starts it
// on a free loopback port. initdb and postgres refuse to run as root, so
// they run as the postgres account (a setuid child). The test is skipped,
// saying why, where that cannot work.
func newPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	if _, err := os.Stat(filepath.Join(pgBin, "initdb")); err != nil {
		skipOutsideCI(t, "no PostgreSQL server binaries at %s (%v): cannot start a private server to stop", pgBin, err)
	}
	p := &privatePG{t: t, bin: pgBin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			skipOutsideCI(t, "running as root, initdb needs another account and there is no postgres account: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	root, err := os.MkdirTemp("", "corral-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if p.cred != nil {
		if err := os.Chown(root, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	p.dir, p.sock, p.logPath = filepath.Join(root, "data"), root, filepath.Join(root, "server.log")
	if out, err := p.run("initdb", "-D", p.dir, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		skipOutsideCI(t, "initdb of a private server failed: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	p.start()
	t.Cleanup(func() { p.run("pg_ctl", "-D", p.dir, "-m", "immediate", "stop") })
	return p
}

func (p *privatePG) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

func (p *privatePG) run(tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(p.bin, tool), args...)
	cmd.Dir = p.sock
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// start starts the server and waits until it accepts connections.
func (p *privatePG) start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", p.port, p.sock)
	if out, err := p.run("pg_ctl", "-D", p.dir, "-o", opts, "-l", p.logPath, "-w", "-t", "30", "start"); err != nil {
		log, _ := os.ReadFile(p.logPath)
		p.t.Fatalf("starting the private PostgreSQL: %v\n%s\n%s", err, out, log)
	}
}

// stop is an immediate shutdown: every connection is cut, nothing is
// flushed, as when the database's host dies.
func (p *privatePG) stop() {
	p.t.Helper()
	if out, err := p.run("pg_ctl", "-D", p.dir, "-m", "immediate", "-w", "stop"); err != nil {
		p.t.Fatalf("stopping the private PostgreSQL: %v\n%s", err, out)
	}
}

// skipOutsideCI skips where a private PostgreSQL cannot be started, except
// under CI=true, whose machine can start one: there it is a failure.
func skipOutsideCI(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
