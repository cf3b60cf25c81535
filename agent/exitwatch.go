package agent

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A task's exit is watched through a pidfd parked in Go's netpoller, not by
// a goroutine blocked in wait4/waitid: a blocked wait holds an OS thread, and
// one `corral up` running 10,000 tasks would pass Go's limit of 10,000
// threads and crash. Once the pidfd is readable the process has exited, and
// reaping it (for a child) returns at once.

// openPidfd opens a nonblocking pidfd for pid, registered with the
// netpoller. Callers that adopt a process must check afterwards that pid is
// still the process they mean: the pidfd names whatever pid is now.
func openPidfd(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid)), nil
}

// awaitExit parks the calling goroutine, holding no thread, until the
// process of pidfd f has exited (nil). An error (f closed, or a pidfd the
// netpoller cannot hold) says nothing of the process: the caller watches it
// another way.
func awaitExit(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		// Asked again after every wake-up: a wake-up alone does not prove
		// the exit.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				pollErr = err
				return true
			}
			return n > 0
		}
	})
	if err != nil {
		return err
	}
	return pollErr
}
