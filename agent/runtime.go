package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/agent/internal/procfs"
)

// runtime runs task processes inside containers. osRuntime is the real one;
// tests of the supervision logic use a fake.
type runtime interface {
	mode() cgroup.Mode
	// enforced reports whether the kernel enforces memory limits; when it
	// does not, the agent kills tasks over their limit itself.
	enforced() bool
	start(ls launchSpec) (process, error)
	// adopt finds a process started by a previous agent: the pid must be
	// alive with the recorded start time, or adopt fails and leaves nothing
	// of the process alive.
	adopt(container string, pid int, startTicks uint64) (process, error)
	// sweep destroys the containers under the agent's parent that are not
	// in keep, killing what runs in them.
	sweep(keep map[string]bool) []string
	// close stops the runtime's work and removes the agent's parent cgroup
	// when no container is left in it (tasks kept running stay, with it).
	close() error
}

type launchSpec struct {
	container      string
	path           string // resolved executable
	args           []string
	env            []string
	dir            string
	stdout, stderr string // log files, opened for appending
	limits         cgroup.Limits
	cred           *credential // who the process runs as; nil: the agent's user
}

type process interface {
	pid() int
	startTicks() uint64
	// signal signals the task's process group; SIGKILL also reaches every
	// process left in its container.
	signal(sig syscall.Signal) error
	done() <-chan struct{}
	// exit is valid once done is closed.
	exit() exitStatus
	stats() (cgroup.Stats, error)
	update(l cgroup.Limits) error
	// release destroys the container once the process has exited.
	release() error
}

type exitStatus struct {
	known  bool // false when the process was adopted: only its parent learns the status
	code   int  // -1 when killed by a signal
	signal syscall.Signal
}

func (e exitStatus) signalName() string {
	if e.signal == 0 {
		return ""
	}
	return signalName(e.signal)
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return "SIG" + strconv.Itoa(int(s))
}

// joinScript runs as the task's first process: it writes its own pid into
// the container's files, then execs the task, so the task's code never
// runs outside its container. Exit 125 means it could not join.
const joinScript = `n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"`

// gateScript runs as the first process of a task that runs as another user,
// who cannot write the container's files: it waits until the agent has put
// its pid there and says so on fd 3, then execs the task. If the agent
// closes fd 3 without a word, the task never runs (exit 125).
const gateScript = `read -r go <&3 || exit 125; exec 3<&-; exec "$@"`

type osRuntime struct {
	mgr  cgroup.Manager
	stop chan struct{} // closed by close: adopted-process watchers end
	once sync.Once
}

func newOSRuntime(mgr cgroup.Manager) *osRuntime {
	return &osRuntime{mgr: mgr, stop: make(chan struct{})}
}

func (r *osRuntime) mode() cgroup.Mode { return r.mgr.Mode() }
func (r *osRuntime) enforced() bool    { return r.mgr.KernelEnforced() }
func (r *osRuntime) close() error {
	r.once.Do(func() { close(r.stop) })
	return r.mgr.RemoveParent()
}

func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// shareLog lets a task running as cred read its log: root's, with the
// task's group, 0640.
func shareLog(f *os.File, cred *credential) error {
	if cred == nil {
		return nil
	}
	if err := f.Chown(0, int(cred.gid)); err != nil {
		return err
	}
	return f.Chmod(0o640)
}

func (r *osRuntime) start(ls launchSpec) (process, error) {
	c, err := r.mgr.Create(ls.container, ls.limits)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (process, error) {
		_ = c.Destroy()
		return nil, err
	}
	stdout, stderr, err := openTaskLogs(ls)
	if err != nil {
		return fail(err)
	}
	defer stdout.Close()
	defer stderr.Close()
	files := c.JoinFiles()
	argv, gate, gateRead, err := joinArgv(ls, files)
	if err != nil {
		return fail(err)
	}
	if gate != nil {
		defer gate.Close()
	}
	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         ls.env,
		Dir:         ls.dir,
		Stdout:      stdout,
		Stderr:      stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Credential: ls.cred.sys()},
	}
	if gateRead != nil {
		cmd.ExtraFiles = []*os.File{gateRead}
	}
	err = cmd.Start()
	if gateRead != nil {
		gateRead.Close()
	}
	if err != nil {
		return fail(fmt.Errorf("start %s: %w", ls.path, err))
	}
	if err := enterContainer(c, cmd, files, gate); err != nil {
		return fail(err)
	}
	return watchExit(c, cmd), nil
}

// openTaskLogs opens the task's log files. The task writes straight into
// them, not through a pipe to the agent, so it outlives an agent restart;
// rotation copies and truncates (see logs.go).
func openTaskLogs(ls launchSpec) (stdout, stderr *os.File, err error) {
	if stdout, err = openLog(ls.stdout); err != nil {
		return nil, nil, err
	}
	if stderr, err = openLog(ls.stderr); err != nil {
		stdout.Close()
		return nil, nil, err
	}
	for _, f := range []*os.File{stdout, stderr} {
		if err := shareLog(f, ls.cred); err != nil {
			stdout.Close()
			stderr.Close()
			return nil, nil, fmt.Errorf("log %s: %w", f.Name(), err)
		}
	}
	return stdout, stderr, nil
}

// joinArgv is the command line that starts the task inside the container
// whose join files are given. A task run as another user cannot join the
// container itself: the agent writes its pid, then opens the gate, the
// write end of a pipe whose read end the task inherits.
func joinArgv(ls launchSpec, files []string) (argv []string, gate, gateRead *os.File, err error) {
	argv = append([]string{ls.path}, ls.args...)
	switch {
	case len(files) > 0 && ls.cred != nil:
		if gateRead, gate, err = os.Pipe(); err != nil {
			return nil, nil, nil, err
		}
		argv = append([]string{"/bin/sh", "-c", gateScript, "corral-task"}, argv...)
	case len(files) > 0:
		pre := append([]string{"/bin/sh", "-c", joinScript, "corral-task", strconv.Itoa(len(files))}, files...)
		argv = append(pre, argv...)
	}
	return argv, gate, gateRead, nil
}

// enterContainer moves the started task into container c, through the
// gate when there is one; on failure the task is killed and reaped.
func enterContainer(c cgroup.Container, cmd *exec.Cmd, files []string, gate *os.File) error {
	pid := cmd.Process.Pid
	kill := func(err error) error {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return err
	}
	if gate != nil {
		for _, f := range files {
			if err := writePid(f, pid); err != nil {
				gate.Close() // the gate never opens: the task exits 125
				return kill(fmt.Errorf("moving the task into its container: %w", err))
			}
		}
		if _, err := gate.Write([]byte("go\n")); err != nil {
			return kill(fmt.Errorf("starting the task: %w", err))
		}
	}
	if err := c.Attach(pid); err != nil {
		return kill(err)
	}
	return nil
}

// watchExit returns the started task's process, which learns of its exit
// from a goroutine that reaps it.
func watchExit(c cgroup.Container, cmd *exec.Cmd) *osProcess {
	pid := cmd.Process.Pid
	p := &osProcess{c: c, p: pid, doneCh: make(chan struct{})}
	// The start time identifies the process across an agent restart; exec
	// does not change it. A process already gone has none, and is reaped
	// below like any other.
	if st, err := procfs.ReadStat(pid); err == nil {
		p.ticks = st.StartTicks
	}
	// A pidfd opened now names the child: it cannot be reaped, so its pid
	// cannot be reused, until the wait below. os.Process holds a pidfd of
	// its own; it is released, so that a task costs one descriptor, not two
	// (10,000 tasks would pass a limit of 20,000 open files).
	pidfd, err := openPidfd(pid)
	if err != nil {
		go func() {
			_ = cmd.Wait() // the status says everything Wait knows
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			p.exited(ws)
		}()
		return p
	}
	_ = cmd.Process.Release()
	go func() {
		_ = awaitExit(pidfd) // on failure wait4 blocks, as Wait would
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
		pidfd.Close()
		p.exited(ws)
	}()
	return p
}

// exited records the status of a child that was reaped and closes done.
func (p *osProcess) exited(ws syscall.WaitStatus) {
	p.status = exitStatus{known: true, code: ws.ExitStatus()}
	if ws.Signaled() {
		p.status.signal = ws.Signal()
	}
	close(p.doneCh)
}

// writePid moves pid into the container whose cgroup.procs is path.
func writePid(path string, pid int) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strconv.Itoa(pid)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *osRuntime) adopt(container string, pid int, startTicks uint64) (process, error) {
	st, err := procfs.ReadStat(pid)
	if err != nil || !st.Alive() || st.StartTicks != startTicks {
		// Not ours any more: never signal a pid the kernel may have reused.
		if c, err := r.mgr.Open(container); err == nil {
			_ = c.Destroy()
		}
		return nil, fmt.Errorf("process %d started at tick %d is gone", pid, startTicks)
	}
	c, err := r.mgr.Open(container)
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return nil, fmt.Errorf("process %d is alive but its container is gone (%v): killed", pid, err)
	}
	if err := c.Attach(pid); err != nil {
		_ = c.Destroy()
		return nil, err
	}
	p := &osProcess{c: c, p: pid, ticks: startTicks, doneCh: make(chan struct{})}
	// The process is not our child: its exit can only be seen, not waited
	// for, and its status is lost. A pidfd shows it without a thread or a
	// poll; it is opened after the check above, so the start time is checked
	// again to know it names the same process.
	if pidfd, err := openPidfd(pid); err == nil {
		if st, err := procfs.ReadStat(pid); err == nil && st.Alive() && st.StartTicks == startTicks {
			go r.watchAdopted(p, pidfd)
			return p, nil
		}
		pidfd.Close() // gone already, or another process: the poll below sees it
	}
	go r.pollAdopted(p)
	return p, nil
}

// pollAdopted closes p's done channel when its process is gone, read from
// /proc ten times a second; on the runtime's close it ends without.
func (r *osRuntime) pollAdopted(p *osProcess) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		st, err := procfs.ReadStat(p.p)
		if err != nil || !st.Alive() || st.StartTicks != p.ticks {
			p.status = exitStatus{code: -1}
			close(p.doneCh)
			return
		}
	}
}

// watchAdopted closes p's done channel when the process of pidfd exits;
// on the runtime's close it ends without, as the poll does. Should the
// netpoller not hold the pidfd, it polls the process's start time.
func (r *osRuntime) watchAdopted(p *osProcess, pidfd *os.File) {
	exited := make(chan error, 1)
	go func() { exited <- awaitExit(pidfd) }()
	select {
	case <-r.stop:
		pidfd.Close() // ends awaitExit
		<-exited
		return
	case err := <-exited:
		pidfd.Close()
		if err != nil {
			r.pollAdopted(p)
			return
		}
	}
	p.status = exitStatus{code: -1}
	close(p.doneCh)
}

func (r *osRuntime) sweep(keep map[string]bool) []string {
	names, _ := r.mgr.List()
	var swept []string
	for _, n := range names {
		if keep[n] {
			continue
		}
		if c, err := r.mgr.Open(n); err == nil && c.Destroy() == nil {
			swept = append(swept, n)
		}
	}
	return swept
}

type osProcess struct {
	c      cgroup.Container
	p      int
	ticks  uint64
	doneCh chan struct{}
	status exitStatus // written before doneCh is closed
}

func (p *osProcess) pid() int                     { return p.p }
func (p *osProcess) startTicks() uint64           { return p.ticks }
func (p *osProcess) done() <-chan struct{}        { return p.doneCh }
func (p *osProcess) exit() exitStatus             { <-p.doneCh; return p.status }
func (p *osProcess) stats() (cgroup.Stats, error) { return p.c.Stats() }
func (p *osProcess) update(l cgroup.Limits) error { return p.c.Update(l) }
func (p *osProcess) release() error               { return p.c.Destroy() }

func (p *osProcess) signal(sig syscall.Signal) error {
	select {
	case <-p.doneCh:
		// The pid may already belong to someone else.
		if sig == syscall.SIGKILL {
			p.killContainer()
		}
		return nil
	default:
	}
	err := syscall.Kill(-p.p, sig)
	if errors.Is(err, syscall.ESRCH) {
		err = nil
	}
	if sig == syscall.SIGKILL {
		p.killContainer()
	}
	return err
}

// killContainer reaches the processes that left the task's process group.
func (p *osProcess) killContainer() {
	pids, _ := p.c.Pids()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
