package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The agent's state: what a restarted agent needs to find its tasks again.
// It is written whole, alternately into two slot files, each headed by a
// sequence number and a checksum; the reader takes the valid slot with the
// higher sequence. A crash while writing spoils only the slot being
// written, so the previous state survives. Renaming a temporary file over
// the old one would do the same, but on ext4 a rename over an existing file
// flushes its data and costs milliseconds, on the path of every poll that
// changes something.
var stateFiles = [2]string{"state.0", "state.1"}

// HasState tells whether an agent has saved its state in dataDir: a
// restarted agent there has tasks to re-adopt.
func HasState(dataDir string) bool {
	for _, name := range stateFiles {
		if _, err := os.Stat(filepath.Join(dataDir, name)); err == nil {
			return true
		}
	}
	return false
}

const stateMagic = "corral-agent-state"

type savedState struct {
	Version int               `json:"version"`
	BootID  string            `json:"boot_id"` // pids mean nothing after a reboot
	Epoch   int64             `json:"epoch"`
	Cell    string            `json:"cell"`
	NextSeq uint64            `json:"next_seq"`
	Dropped uint64            `json:"dropped"`
	Events  []json.RawMessage `json:"events"`
	Tasks   []savedTask       `json:"tasks"`
}

type savedTask struct {
	Status         json.RawMessage `json:"status"` // agentpb.TaskStatus
	Spec           json.RawMessage `json:"spec"`   // agentpb.TaskSpec
	PendingSpec    json.RawMessage `json:"pending_spec,omitempty"`
	PendingVersion int64           `json:"pending_version,omitempty"`
	Gen            int64           `json:"gen"`
	Container      string          `json:"container"`
	StartTicks     uint64          `json:"start_ticks"`
	Consecutive    int32           `json:"consecutive"`
	Killing        KillKind        `json:"killing"`
	StopReason     string          `json:"stop_reason,omitempty"`
	CPUBase        float64         `json:"cpu_base"` // of ended processes: an adopted one is counted again whole
	MemInt         float64         `json:"mem_byte_seconds"`
	UID            uint32          `json:"uid,omitempty"` // of Config.TaskUIDs
}

// save writes the state file. a.mu held.
func (a *Agent) save() error {
	s := savedState{Version: 1, BootID: a.bootID, Epoch: a.epoch, Cell: a.cell, NextSeq: a.nextSeq, Dropped: a.dropped}
	for _, ev := range a.events {
		b, err := protojson.Marshal(ev)
		if err != nil {
			return err
		}
		s.Events = append(s.Events, b)
	}
	// In key order, so a restart restores (and reports) tasks in an order
	// that does not depend on map iteration.
	for _, key := range slices.Sorted(maps.Keys(a.tasks)) {
		t := a.tasks[key]
		st, err := protojson.Marshal(a.status(t))
		if err != nil {
			return err
		}
		spec, err := protojson.Marshal(t.spec)
		if err != nil {
			return err
		}
		var pending []byte
		if t.pendingSpec != nil {
			if pending, err = protojson.Marshal(t.pendingSpec); err != nil {
				return err
			}
		}
		s.Tasks = append(s.Tasks, savedTask{
			Status: st, Spec: spec, PendingSpec: pending, PendingVersion: t.pendingVersion,
			Gen: t.gen, Container: t.container, StartTicks: t.ticks, Consecutive: t.consecutive,
			Killing: t.killing, StopReason: t.stopReason, CPUBase: t.u.cpuBase, MemInt: t.u.memInt,
			UID: t.uid,
		})
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	a.saveSeq++
	if err := writeSlot(filepath.Join(a.cfg.DataDir, stateFiles[a.saveSeq%2]), a.saveSeq, b); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	a.dirty = false
	return nil
}

func writeSlot(path string, seq uint64, body []byte) error {
	head := fmt.Sprintf("%s %d %08x %d\n", stateMagic, seq, crc32.ChecksumIEEE(body), len(body))
	// 0600: a task's spec holds its secrets in the clear.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	buf := append([]byte(head), body...)
	// Written over the old content and cut to length: truncating to zero
	// first would make ext4 flush, as a rename does.
	if _, err := f.WriteAt(buf, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(int64(len(buf))); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readState returns the newest valid slot's body and sequence, or nil when
// there is none. A slot that exists but is damaged is an error only when no
// valid slot remains.
func readState(dir string) (body []byte, seq uint64, err error) {
	var damaged error
	for _, name := range stateFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		s, bd, err := parseSlot(b)
		if err != nil {
			damaged = fmt.Errorf("%s: %w", name, err)
			continue
		}
		if body == nil || s > seq {
			body, seq = bd, s
		}
	}
	if body == nil && damaged != nil {
		return nil, 0, damaged
	}
	return body, seq, nil
}

func parseSlot(b []byte) (uint64, []byte, error) {
	head, body, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return 0, nil, errors.New("no header")
	}
	var magic string
	var seq uint64
	var sum uint32
	var n int
	if _, err := fmt.Sscanf(string(head), "%s %d %x %d", &magic, &seq, &sum, &n); err != nil || magic != stateMagic {
		return 0, nil, fmt.Errorf("bad header %q", head)
	}
	if len(body) != n || crc32.ChecksumIEEE(body) != sum {
		return 0, nil, errors.New("torn write: length or checksum does not match")
	}
	return seq, body, nil
}

// restore loads the state file and takes the tasks back: a process still
// running with its recorded start time is adopted; one that is gone ended
// while no agent watched, and its restart policy decides; every container
// under the agent's parent that no adopted task owns is destroyed, with
// whatever still runs in it. a.mu held.
func (a *Agent) restore() error {
	path := filepath.Join(a.cfg.DataDir, "state.*")
	for _, name := range stateFiles {
		// Written 0644 by agents before secrets reached them.
		if err := os.Chmod(filepath.Join(a.cfg.DataDir, name), 0o600); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	b, seq, err := readState(a.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("%s is damaged (%v): move it away to start without the tasks it lists", path, err)
	}
	if b == nil {
		a.sweep(nil)
		return nil
	}
	a.saveSeq = seq
	var s savedState
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s is corrupt (%v): move it away to start without the tasks it lists", path, err)
	}
	a.epoch, a.cell, a.nextSeq, a.dropped = s.Epoch, s.Cell, max(s.NextSeq, 1), s.Dropped
	for _, raw := range s.Events {
		ev := &agentpb.AgentEvent{}
		if err := protojson.Unmarshal(raw, ev); err != nil {
			return fmt.Errorf("%s: event: %w", path, err)
		}
		a.events = append(a.events, ev)
	}
	sameBoot := s.BootID != "" && s.BootID == a.bootID
	now := a.clock.Now()
	keep := map[string]bool{}
	for _, st := range s.Tasks {
		t, err := loadTask(st)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		t.sandbox = a.sandboxOf(t.ref)
		a.tasks[t.key] = t
		switch t.state {
		case agentpb.TaskState_TASK_STATE_STARTING, agentpb.TaskState_TASK_STATE_RUNNING, agentpb.TaskState_TASK_STATE_STOPPING:
			var p process
			err := errors.New("the machine rebooted")
			if sameBoot && t.pid > 0 {
				p, err = a.rt.adopt(t.container, t.pid, t.ticks)
			}
			if err != nil {
				a.taskLog(t.key).Info("task lost while the agent was down", "pid", t.pid, "err", err)
				t.message = err.Error()
				a.exitedUnwatched(t, err)
				continue
			}
			keep[t.container] = true
			t.proc, t.adopted = p, true
			t.state = agentpb.TaskState_TASK_STATE_RUNNING
			t.u.begin(now)
			a.taskLog(t.key).Info("adopted task", "pid", t.pid)
			a.emit(agentpb.EventKind_EVENT_KIND_ADOPTED, t, nil)
			a.watch(t)
			if t.killing != KillNone {
				// The grace period ran while the agent was away.
				t.state = agentpb.TaskState_TASK_STATE_STOPPING
				_ = p.signal(syscall.SIGKILL)
			} else {
				a.armHealth(t)
			}
		case agentpb.TaskState_TASK_STATE_BACKOFF:
			a.scheduleRestart(t, max(t.nextStartAt.Sub(now), 0))
		}
	}
	a.sweep(keep)
	a.dirty = true
	return nil
}

// exitedUnwatched ends the record of a process that ended while no agent
// watched it: its status is unknown.
func (a *Agent) exitedUnwatched(t *task, cause error) {
	a.settle(t, Exit{Code: -1, OOM: t.killing == KillOOM, Lost: cause})
}

func (a *Agent) sweep(keep map[string]bool) {
	for _, n := range a.rt.sweep(keep) {
		a.log.Info("destroyed a container no task owns", "container", n)
	}
}

func loadTask(st savedTask) (*task, error) {
	status := &agentpb.TaskStatus{}
	if err := protojson.Unmarshal(st.Status, status); err != nil {
		return nil, fmt.Errorf("task status: %w", err)
	}
	spec := &agentpb.TaskSpec{}
	if err := protojson.Unmarshal(st.Spec, spec); err != nil {
		return nil, fmt.Errorf("task spec: %w", err)
	}
	if err := ValidateTaskRef(status.Task); err != nil {
		return nil, err
	}
	t := &task{
		ref:            proto.Clone(status.Task).(*events.TaskRef),
		key:            TaskKey(status.Task),
		version:        status.SpecVersion,
		submission:     status.Submission,
		spec:           spec,
		state:          status.State,
		gen:            st.Gen,
		container:      st.Container,
		pid:            int(status.Pid),
		ticks:          st.StartTicks,
		adopted:        status.Adopted,
		startedAt:      fromUs(status.StartedAtUs),
		finishedAt:     fromUs(status.FinishedAtUs),
		nextStartAt:    fromUs(status.NextStartAtUs),
		exitCode:       status.ExitCode,
		signal:         status.Signal,
		restarts:       status.Restarts,
		failures:       status.Failures,
		oomKills:       status.OomKills,
		consecutive:    st.Consecutive,
		reason:         status.Reason,
		message:        status.Message,
		health:         status.Health,
		healthFailures: status.HealthFailures,
		healthMessage:  status.HealthMessage,
		killing:        st.Killing,
		stopReason:     st.StopReason,
		uid:            st.UID,
		pendingVersion: st.PendingVersion,
	}
	if len(st.PendingSpec) > 0 {
		t.pendingSpec = &agentpb.TaskSpec{}
		if err := protojson.Unmarshal(st.PendingSpec, t.pendingSpec); err != nil {
			return nil, fmt.Errorf("task pending spec: %w", err)
		}
	}
	t.u.cpuBase, t.u.memInt = st.CPUBase, st.MemInt
	return t, nil
}
