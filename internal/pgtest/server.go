package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options shape a private server.
type Options struct {
	// Durable keeps PostgreSQL's own durability settings (fsync,
	// synchronous_commit, full_page_writes): for tests that cut the server
	// off and count on every acknowledged commit surviving, and for
	// benchmarks whose figures stand for a real server. Otherwise the
	// server trades crash safety for speed, which a throwaway data
	// directory never needs.
	Durable bool
}

// fastSettings turn off what only protects data across a crash of the
// server or its host; the data directory dies with the test binary anyway.
var fastSettings = []string{"fsync=off", "synchronous_commit=off", "full_page_writes=off"}

// ErrNoAccount is returned when running as root with neither a postgres
// nor a nobody account: PostgreSQL refuses to run as root.
var ErrNoAccount = errors.New("running as root and no unprivileged account (postgres or nobody) to run PostgreSQL as")

// Server is a PostgreSQL server of the test binary's own: a data directory
// in a temporary directory, a free loopback port, its unix socket inside the
// temporary directory. Close stops it and removes the directory; a watchdog
// process does both if the test binary dies first.
type Server struct {
	opts    Options
	bin     string              // directory of initdb and postgres
	root    string              // temporary directory: data/, server.log, the socket
	port    int                 //
	account *syscall.Credential // whom the server runs as; nil: as this process
	dog     *watchdog

	mu      sync.Mutex
	closed  bool
	running *exec.Cmd
	exited  chan struct{} // closed once running has been reaped
}

// StartServer initialises a cluster in a new temporary directory and starts
// it. Errors wrapping ErrNoBinaries or ErrNoAccount mean the environment
// lacks a part; others are failures.
func StartServer(opts Options) (*Server, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	account, err := serverAccount()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "corral-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temporary directory: %w", err)
	}
	s := &Server{opts: opts, bin: bin, root: root, account: account}
	// The watchdog first: from here on, a killed test binary leaves
	// nothing behind.
	if s.dog, err = startWatchdog(root); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if err := s.init(); err != nil {
		s.Close()
		return nil, err
	}
	// A free port can be taken between choosing and binding it (test
	// binaries start servers side by side): choose again.
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err == nil {
			if err = s.Start(); err == nil {
				live.add(s)
				return s, nil
			}
		}
		if attempt == 5 || !errors.Is(err, errPortTaken) {
			s.Close()
			return nil, err
		}
	}
}

// URL is the server's postgres database as its superuser postgres.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Dir is the temporary directory holding the data directory, the server's
// log and its socket.
func (s *Server) Dir() string { return s.root }

func (s *Server) dataDir() string { return filepath.Join(s.root, "data") }
func (s *Server) logPath() string { return filepath.Join(s.root, "server.log") }

func (s *Server) init() error {
	if s.account != nil {
		if err := os.Chown(s.root, int(s.account.Uid), int(s.account.Gid)); err != nil {
			return fmt.Errorf("pgtest: handing %s to uid %d: %w", s.root, s.account.Uid, err)
		}
		if err := reachable(s.root); err != nil {
			return err
		}
	}
	cmd := s.command("initdb", "-D", s.dataDir(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out.Bytes())
	}
	return nil
}

var errPortTaken = errors.New("port taken")

// Start starts the server (again, after Stop: on the same port and data)
// and returns once it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.running != nil {
		return fmt.Errorf("pgtest: the server in %s is closed or already running", s.root)
	}
	logFile, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: server log: %w", err)
	}
	defer logFile.Close() // the server holds its own copy
	logStart, _ := logFile.Seek(0, 2)
	args := []string{"-D", s.dataDir(), "-p", strconv.Itoa(s.port), "-k", s.root, "-c", "listen_addresses=127.0.0.1"}
	if !s.opts.Durable {
		for _, c := range fastSettings {
			args = append(args, "-c", c)
		}
	}
	cmd := s.command("postgres", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.running, s.exited = cmd, exited
	if err := s.waitReady(exited); err != nil {
		s.stopLocked()
		log, _ := os.ReadFile(s.logPath())
		if int64(len(log)) >= logStart {
			log = log[logStart:]
		}
		if bytes.Contains(log, []byte("could not bind")) || bytes.Contains(log, []byte("already in use")) {
			err = fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return fmt.Errorf("pgtest: postgres on port %d: %w\n%s", s.port, err, log)
	}
	return nil
}

// waitReady polls until a connection succeeds, the server exits or a
// minute passes (a loaded 2-core machine may take seconds).
func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.URL())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			return errors.New("the server exited")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not accepting connections after a minute: %w", err)
		}
	}
}

// Stop is an immediate shutdown, as `pg_ctl stop -m immediate`: every
// connection is cut and nothing is checkpointed; the next Start recovers
// from the write-ahead log.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		return fmt.Errorf("pgtest: the server in %s is not running", s.root)
	}
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	defer func() { s.running, s.exited = nil, nil }()
	// SIGQUIT is PostgreSQL's immediate shutdown; SIGKILL if it hangs.
	if err := s.running.Process.Signal(syscall.SIGQUIT); err != nil {
		select {
		case <-s.exited:
			return nil
		default:
			return fmt.Errorf("pgtest: stopping postgres: %w", err)
		}
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(30 * time.Second):
		s.running.Process.Kill()
		<-s.exited
		return errors.New("pgtest: postgres ignored SIGQUIT for 30 s and was killed")
	}
}

// Close stops the server if it runs and removes its directory.
func (s *Server) Close() error {
	live.remove(s)
	var errs []error
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.running != nil {
		errs = append(errs, s.stopLocked())
	}
	s.mu.Unlock()
	errs = append(errs, os.RemoveAll(s.root))
	errs = append(errs, s.dog.release())
	return errors.Join(errs...)
}

// command runs a server binary as the server's account, in its own process
// group (a Ctrl-C to the test run reaches the test binary, whose watchdog
// then stops the server in order), from a directory that account can enter.
func (s *Server) command(tool string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, tool), args...)
	cmd.Dir = s.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.account}
	return cmd
}

// serverAccount is whom initdb and postgres run as: this process unless it
// is root, which PostgreSQL refuses; then the postgres account, else nobody.
func serverAccount() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, ErrNoAccount
}

// reachable checks that every directory above dir lets others through,
// so that the server's account can reach its data directory; a TMPDIR
// under /root would not.
func reachable(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("pgtest: PostgreSQL runs as another account than root, and %s (above its data directory %s) does not let others through (mode %v): set TMPDIR to a directory it can reach, such as /tmp", d, dir, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: choosing a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
