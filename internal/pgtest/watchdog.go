package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// watchdog stops a server and removes its directory when the test binary
// dies before Close: killed, timed out, crashed. It is a shell reading a
// pipe whose only writer is the test binary (the descriptor is
// close-on-exec, so no other child holds it): the read ends when the
// binary's last reference goes, however it went.
type watchdog struct {
	cmd *exec.Cmd
	w   *os.File // the writing end; closing it releases the watchdog
}

// watchdogScript waits for the end of its input, then stops the server
// the data directory's postmaster.pid names (PostgreSQL removes the file
// when it exits) as `pg_ctl stop -m immediate` would, waits up to ten
// seconds for it to go, and removes the directory. $1 is the directory.
const watchdogScript = `
while read -r _; do :; done
pidfile="$1/data/postmaster.pid"
if [ -f "$pidfile" ]; then
	pid=$(head -n 1 "$pidfile")
	if [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null; then
		n=0
		while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n+1)); done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
	fi
fi
rm -rf "$1"
`

// startWatchdog starts the watchdog of dir. It runs in a process group of
// its own, so that a Ctrl-C meant for the test run does not stop it before
// it has cleaned up.
func startWatchdog(dir string) (*watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pgtest: watchdog pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "corral-pgtest-watchdog", dir)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("pgtest: starting the watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, w: w}, nil
}

// release ends the watchdog once the server is stopped and its directory
// gone, and waits for it.
func (d *watchdog) release() error {
	if d == nil {
		return nil
	}
	d.w.Close()
	if err := d.cmd.Wait(); err != nil {
		return fmt.Errorf("pgtest: watchdog: %w", err)
	}
	return nil
}
