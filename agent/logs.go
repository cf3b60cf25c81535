package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// rotateLogs rotates a sandbox's stdout and stderr past maxBytes, keeping
// keep older files (stdout.1 the newest).
//
// The task holds its log files open with O_APPEND, so the agent copies and
// truncates rather than renames: the task's next write lands at the start of
// the emptied file, and nothing is lost except what is written between the
// copy and the truncate. The price buys tasks that never depend on the agent
// to write, so they survive its restart.
func rotateLogs(sandbox string, maxBytes int64, keep int) {
	for _, name := range []string{"stdout", "stderr"} {
		_, _ = rotate(filepath.Join(sandbox, "logs", name), maxBytes, keep)
	}
}

func rotate(path string, maxBytes int64, keep int) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() < maxBytes {
		return false, err
	}
	if keep < 1 {
		return true, os.Truncate(path, 0)
	}
	_ = os.Remove(path + "." + strconv.Itoa(keep))
	for i := keep - 1; i >= 1; i-- {
		_ = os.Rename(path+"."+strconv.Itoa(i), path+"."+strconv.Itoa(i+1))
	}
	if err := copyFile(path, path+".1"); err != nil {
		return false, fmt.Errorf("rotate %s: %w", path, err)
	}
	return true, os.Truncate(path, 0)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// removeOldSandboxes deletes the sandboxes of tasks the agent no longer
// knows whose logs were last written more than RetainEnded ago. Ended tasks
// it still reports keep theirs until they are dropped.
func (a *Agent) removeOldSandboxes() {
	root := filepath.Join(a.cfg.DataDir, "tasks")
	a.mu.Lock()
	known := map[string]bool{}
	for _, t := range a.tasks {
		known[t.sandbox] = true
	}
	a.mu.Unlock()
	cutoff := time.Now().Add(-a.cfg.RetainEnded)
	users, _ := os.ReadDir(root)
	for _, u := range users {
		jobs, _ := os.ReadDir(filepath.Join(root, u.Name()))
		for _, j := range jobs {
			jobDir := filepath.Join(root, u.Name(), j.Name())
			idxs, _ := os.ReadDir(jobDir)
			for _, i := range idxs {
				dir := filepath.Join(jobDir, i.Name())
				if known[dir] || lastWrite(dir).After(cutoff) {
					continue
				}
				if err := os.RemoveAll(dir); err != nil {
					a.log.Warn("removing old sandbox", "dir", dir, "err", err)
				}
			}
			_ = os.Remove(jobDir) // only when empty
		}
		_ = os.Remove(filepath.Join(root, u.Name()))
	}
}

// lastWrite is the newest modification time of a sandbox's logs and
// directory.
func lastWrite(dir string) time.Time {
	var t time.Time
	for _, p := range []string{dir, filepath.Join(dir, "logs"), filepath.Join(dir, "logs", "stdout"), filepath.Join(dir, "logs", "stderr")} {
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return time.Now() // unsure: keep it
		}
	}
	return t
}
