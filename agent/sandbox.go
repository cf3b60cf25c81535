package agent

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// UIDRange is a range of uids given to tasks, one each.
type UIDRange struct {
	First uint32
	Count uint32
}

// credential is who a task's process runs as; nil is the agent's own user.
type credential struct {
	uid, gid uint32
}

func (c *credential) sys() *syscall.Credential {
	if c == nil {
		return nil
	}
	return &syscall.Credential{Uid: c.uid, Gid: c.gid, Groups: []uint32{}}
}

// isolating reports whether tasks run as users other than the agent's.
func (c Config) isolating() bool { return c.TaskUIDs.Count > 0 || c.TaskUser != "" }

// checkTaskUsers validates TaskUIDs and TaskUser: only root can run tasks
// as other users, uid 0 is never given out, and every directory above the
// sandboxes must be searchable by others, or no task could reach its own.
func (c Config) checkTaskUsers() error {
	if !c.isolating() {
		return nil
	}
	field := "Config.TaskUIDs"
	if c.TaskUIDs.Count == 0 {
		field = "Config.TaskUser"
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s: the agent runs as uid %d; only root can run tasks as other users", field, os.Geteuid())
	}
	if r := c.TaskUIDs; r.Count > 0 {
		if r.First == 0 || uint64(r.First)+uint64(r.Count)-1 > 1<<31 {
			return fmt.Errorf("Config.TaskUIDs %d+%d: want uids from 1 up to 2^31", r.First, r.Count)
		}
	} else if _, err := lookupTaskUser(c.TaskUser); err != nil {
		return err
	}
	dir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("Config.DataDir: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("Config.DataDir: %w", err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("Config.DataDir %s: %s has mode %v, so tasks running as other users cannot reach their sandboxes; chmod o+x it or choose another data dir", c.DataDir, d, st.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// lookupTaskUser resolves TaskUser, a name or a number, never root.
func lookupTaskUser(name string) (*credential, error) {
	var u *user.User
	var err error
	if _, nerr := strconv.ParseUint(name, 10, 32); nerr == nil {
		u, err = user.LookupId(name)
		if err != nil {
			// A uid with no passwd entry is fine: its group is the same number.
			n, _ := strconv.ParseUint(name, 10, 32)
			if n == 0 {
				return nil, fmt.Errorf("Config.TaskUser %q: tasks must not run as root", name)
			}
			return &credential{uint32(n), uint32(n)}, nil
		}
	} else if u, err = user.Lookup(name); err != nil {
		return nil, fmt.Errorf("Config.TaskUser %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("Config.TaskUser %q: uid %q or gid %q is not a number", name, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("Config.TaskUser %q: tasks must not run as root", name)
	}
	return &credential{uint32(uid), uint32(gid)}, nil
}

// credOf is who t runs as.
func (a *Agent) credOf(t *task) *credential {
	switch {
	case a.cfg.TaskUIDs.Count > 0 && t.uid != 0:
		return &credential{t.uid, t.uid}
	case a.taskUser != nil:
		return a.taskUser
	}
	return nil
}

// assignUID gives a new task a uid of TaskUIDs no task the agent keeps
// has, going round the range so a freed uid is reused as late as possible.
// prev is the task's previous incarnation, whose uid it keeps. a.mu held.
func (a *Agent) assignUID(t, prev *task) error {
	r := a.cfg.TaskUIDs
	if r.Count == 0 {
		return nil
	}
	if prev != nil && prev.uid != 0 {
		t.uid = prev.uid
		return nil
	}
	used := make(map[uint32]bool, len(a.tasks))
	for _, o := range a.tasks {
		used[o.uid] = true
	}
	for i := uint32(0); i < r.Count; i++ {
		n := (a.nextUID + i) % r.Count
		if uid := r.First + n; !used[uid] {
			t.uid = uid
			a.nextUID = (n + 1) % r.Count
			return nil
		}
	}
	return fmt.Errorf("no free task uid: all %d of Config.TaskUIDs %d+%d belong to tasks this agent keeps", r.Count, r.First, r.Count)
}

// prepareSandbox makes t's sandbox. As the agent's own user: every
// directory 0700. As another user: the sandbox and logs/ are root's with
// the task's group (0750), so the task reads its logs but cannot replace
// them with links the agent would follow; work/ and tmp/ are the task's
// (0700). The directories above are root's and 0711: searchable, not
// listable.
func (a *Agent) prepareSandbox(t *task) error {
	cred := a.credOf(t)
	if cred == nil {
		for _, d := range []string{"work", "logs", "tmp"} {
			if err := os.MkdirAll(filepath.Join(t.sandbox, d), 0o700); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
		}
		return nil
	}
	tasks := filepath.Join(a.cfg.DataDir, "tasks")
	rel, err := filepath.Rel(tasks, t.sandbox)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("sandbox %s: not under %s", t.sandbox, tasks)
	}
	dirs := []string{tasks}
	for _, p := range strings.Split(filepath.Dir(rel), string(filepath.Separator)) {
		dirs = append(dirs, filepath.Join(dirs[len(dirs)-1], p))
	}
	for _, d := range dirs {
		if err := ensureDir(d, 0o711, 0, 0); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		path     string
		mode     os.FileMode
		uid, gid uint32
	}{
		{t.sandbox, 0o750, 0, cred.gid},
		{filepath.Join(t.sandbox, "logs"), 0o750, 0, cred.gid},
		{filepath.Join(t.sandbox, "work"), 0o700, cred.uid, cred.gid},
		{filepath.Join(t.sandbox, "tmp"), 0o700, cred.uid, cred.gid},
	} {
		if err := ensureDir(d.path, d.mode, d.uid, d.gid); err != nil {
			return err
		}
	}
	return nil
}

// ensureDir makes dir (not following a link in its place) with the owner
// and mode given.
func ensureDir(dir string, mode os.FileMode, uid, gid uint32) error {
	if err := os.Mkdir(dir, mode); err != nil && !os.IsExist(err) {
		return fmt.Errorf("sandbox: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("sandbox: %s is not a directory", dir)
	}
	if err := os.Lchown(dir, int(uid), int(gid)); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

// retire closes a forgotten task's sandbox to its uid, which may be given
// to another task, and kills what still runs as that uid. a.mu held.
func (a *Agent) retire(t *task) {
	if a.cfg.TaskUIDs.Count == 0 || t.uid == 0 {
		return
	}
	if err := os.Lchown(t.sandbox, 0, 0); err == nil {
		_ = os.Chmod(t.sandbox, 0o700)
	}
	killUID(t.uid)
}

// killUID SIGKILLs every process whose real or effective uid is uid.
func killUID(uid uint32) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	want := strconv.FormatUint(uint64(uid), 10)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" {
				if f[1] == want || f[2] == want {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				break
			}
		}
	}
}
