package agent

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
	"github.com/corralhq/corral/agent/internal/procfs"
	"github.com/corralhq/corral/events"
	"google.golang.org/protobuf/proto"
)

// usage accumulates one task's samples over all its processes.
type usage struct {
	cpuBase float64 // core-seconds of the task's ended processes
	cpuCur  float64 // of the current process
	memInt  float64 // byte-seconds, integrated over samples
	mem     int64   // latest sample
	peak    int64   // of the current process
	disk    int64
	at      time.Time // latest sample; zero before the first

	// The window since the previous poll.
	winStart  time.Time
	winCPU    float64
	winMemInt float64
	winMax    int64
}

// begin starts accounting for a new process.
func (u *usage) begin(now time.Time) {
	u.cpuCur, u.peak, u.mem = 0, 0, 0
	if u.at.IsZero() {
		u.at, u.winStart = now, now
	} else {
		u.integrate(now, 0)
	}
}

func (u *usage) integrate(now time.Time, mem int64) {
	if dt := now.Sub(u.at).Seconds(); dt > 0 {
		u.memInt += float64(u.mem+mem) / 2 * dt
	}
	u.at = now
	u.mem = mem
	u.winMax = max(u.winMax, mem)
}

func (u *usage) sample(now time.Time, st cgroup.Stats) {
	if u.at.IsZero() {
		u.at, u.winStart = now, now
	}
	u.integrate(now, st.MemoryBytes)
	u.cpuCur = max(u.cpuCur, float64(st.CPUNanos)/1e9)
	u.peak = max(u.peak, st.MemoryPeakBytes, st.MemoryBytes)
}

// finish closes the current process's account with its container's last
// counters.
func (u *usage) finish(now time.Time, fin *cgroup.Stats) {
	if fin != nil {
		u.cpuCur = max(u.cpuCur, float64(fin.CPUNanos)/1e9)
		u.peak = max(u.peak, fin.MemoryPeakBytes)
	}
	if !u.at.IsZero() {
		u.integrate(now, 0)
	}
	u.cpuBase += u.cpuCur
	u.cpuCur = 0
}

// report is the task's latest sample at now, the poll; reset starts a new
// window. A window runs to the poll, not to the last sample: one that ended
// at a process's exit would leave the time until the poll to the next
// window, which would then start before this one ended. The time after the
// last sample counts at its memory (none once the process is gone). A
// clock stepped back never moves a window's start back: its windows tile
// its time.
func (u *usage) report(ref *events.TaskRef, now time.Time, reset bool) *agentpb.TaskUsageSample {
	if u.at.IsZero() {
		return nil
	}
	end, memInt := u.at, u.memInt
	if dt := now.Sub(u.at).Seconds(); dt > 0 {
		end, memInt = now, u.memInt+float64(u.mem)*dt
	}
	total := u.cpuBase + u.cpuCur
	mean := u.mem
	if dt := end.Sub(u.winStart).Seconds(); dt > 0 {
		mean = max(int64((memInt-u.winMemInt)/dt), 0)
	}
	s := &agentpb.TaskUsageSample{
		Task:                   proto.Clone(ref).(*events.TaskRef),
		SampledAtUs:            u.at.UnixMicro(),
		CpuCoreSecondsTotal:    total,
		MemoryByteSecondsTotal: memInt,
		MemoryBytes:            u.mem,
		MemoryPeakBytes:        u.peak,
		DiskBytes:              u.disk,
		Window: &events.TaskUsage{
			User:           ref.User,
			Job:            ref.Job,
			Index:          ref.Index,
			CpuCoreSeconds: total - u.winCPU,
			MemoryBytes:    mean,
			MemoryMaxBytes: max(u.winMax, u.mem),
			DiskBytes:      u.disk,
		},
		WindowStartUs: u.winStart.UnixMicro(),
		WindowEndUs:   end.UnixMicro(),
	}
	if reset && end.After(u.winStart) {
		if end.After(u.at) {
			u.integrate(end, u.mem) // what the window counted is counted once
		}
		u.winStart, u.winCPU, u.winMemInt, u.winMax = end, total, u.memInt, u.mem
	}
	return s
}

// ---- the sampling loop -------------------------------------------------------

func (a *Agent) armSampler() {
	a.sampler = a.clock.AfterFunc(a.cfg.SampleInterval, a.sampleTick)
}

type sampleTarget struct {
	t       *task
	gen     int64
	proc    process
	sandbox string
	stats   cgroup.Stats
	err     error
	disk    int64
}

// sampleTick reads every running task's usage off the lock, then enforces
// memory limits (where the kernel does not), relieves machine memory
// pressure, rotates logs and drops ended tasks past their retention.
func (a *Agent) sampleTick() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.ticks++
	diskTick := a.ticks%10 == 1 // walking sandboxes costs more than reading counters
	janitorTick := a.ticks%60 == 1
	var targets []*sampleTarget
	for _, t := range a.tasks {
		if t.proc != nil {
			targets = append(targets, &sampleTarget{t: t, gen: t.gen, proc: t.proc, sandbox: t.sandbox, disk: -1})
		}
	}
	a.mu.Unlock()

	for _, s := range targets {
		s.stats, s.err = s.proc.stats()
		if diskTick {
			s.disk = dirSize(s.sandbox)
		}
		rotateLogs(s.sandbox, a.cfg.LogMaxBytes, a.cfg.LogKeep)
	}
	mem, memErr := procfs.ReadMeminfo()
	if janitorTick {
		a.removeOldSandboxes()
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	now := a.clock.Now()
	if memErr == nil {
		a.machine = mem
	}
	for _, s := range targets {
		t := s.t
		if a.tasks[t.key] != t || t.gen != s.gen || t.proc != s.proc || s.err != nil {
			continue
		}
		t.u.sample(now, s.stats)
		if s.disk >= 0 {
			t.u.disk = s.disk
		}
		limit := orEmpty(t.spec.Resources).MemoryBytes
		if !a.rt.enforced() && limit > 0 && s.stats.MemoryBytes > limit && t.killing != KillOOM {
			a.killNow(t, KillOOM, ReasonOOM, fmt.Sprintf("using %d bytes, over its memory limit of %d", s.stats.MemoryBytes, limit))
		}
	}
	a.relievePressure()
	for key, t := range a.tasks {
		if Ended(t.state) && now.Sub(t.finishedAt) > a.cfg.RetainEnded {
			delete(a.tasks, key)
			a.markDirty()
		}
	}
	a.armSampler()
}

// relievePressure evicts non-prod tasks when the tasks' memory or disk
// exceeds the machine's capacity, or memory is short of the machine's low
// water mark of available memory (Borg §5.5, §6.2): whom is decided by
// pressureVictims. CPU is compressible: it is throttled, never killed for.
// a.mu held.
func (a *Agent) relievePressure() {
	var usedMem, usedDisk int64
	var cands []pressureCandidate
	for _, t := range a.tasks {
		if t.proc == nil || t.killing == KillOOM || t.killing == KillPressure {
			continue // dying by SIGKILL: its memory is as good as free
		}
		usedMem += t.u.mem
		usedDisk += t.u.disk
		if t.spec.Priority < ProdPriority && t.killing != KillStop {
			res := orEmpty(t.spec.Resources)
			cands = append(cands, pressureCandidate{key: t.key, priority: t.spec.Priority, memory: t.u.mem, disk: t.u.disk,
				overLimit: (res.MemoryBytes > 0 && t.u.mem > res.MemoryBytes) || (res.DiskBytes > 0 && t.u.disk > res.DiskBytes)})
		}
	}
	need := pressureNeed{memory: usedMem - a.cfg.Capacity.MemoryBytes}
	if a.cfg.MemoryLowWater > 0 && a.machine.Available > 0 {
		need.memory = max(need.memory, a.cfg.MemoryLowWater-a.machine.Available)
	}
	if a.cfg.Capacity.DiskBytes > 0 {
		need.disk = usedDisk - a.cfg.Capacity.DiskBytes
	}
	if need.memory <= 0 && need.disk <= 0 {
		return
	}
	for _, key := range pressureVictims(cands, need) {
		t := a.tasks[key]
		msg := fmt.Sprintf("machine memory pressure: tasks use %d of %d bytes, %d available; freeing %d",
			usedMem, a.cfg.Capacity.MemoryBytes, a.machine.Available, need.memory)
		if need.memory <= 0 {
			msg = fmt.Sprintf("machine disk pressure: tasks use %d of %d bytes; freeing %d", usedDisk, a.cfg.Capacity.DiskBytes, need.disk)
		}
		a.taskLog(key).Warn("evicting for machine pressure", "priority", t.spec.Priority, "memory", t.u.mem, "disk", t.u.disk)
		a.killNow(t, KillPressure, ReasonOvercommitted, msg)
	}
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
