package infrastore

import "github.com/corralhq/corral/projections"

// The rows of the current-state tables (jobs, tasks, machines, allocs), in
// their column order: each a plain reading of the fold's entity, plus the
// event that last changed it. Written for each entity a batch touched.

func jobRow(j *projections.Job, at jobTouch) row {
	var priority, band, class, count, cpu, mem, disk, labels any
	if s := j.Spec(); s != nil {
		r := s.GetResources()
		priority, band, class = s.GetPriority(), bandOf(s.GetPriority()), schedulingClass(s)
		count, cpu, mem, disk = s.GetTaskCount(), r.GetCpuMilli(), r.GetMemoryBytes(), r.GetDiskBytes()
		labels = labelsValue(s.GetLabels())
	}
	return row{
		j.User, j.Name, j.Current, priority, band, class, count, cpu, mem, disk, labels,
		jobStatus(j), j.SubmittedUS, nzInt(j.EndedUS), nzInt(at.submitPosition), nz(j.EndReason),
		at.time, at.position,
	}
}

func taskRow(t *projections.Task, at taskTouch) row {
	var priority, band any
	if s := t.Spec(); s != nil {
		priority, band = s.GetPriority(), bandOf(s.GetPriority())
	}
	var eventType any
	if at.eventType >= 0 {
		eventType = at.eventType
	}
	l, r := t.Limit, t.Reservation
	return row{
		t.Job.User, t.Job.Name, t.Index, taskStateName(t), nz(t.Machine), t.SpecVersion, priority, band,
		l.CPUMilli, l.MemoryBytes, l.DiskBytes, r.CPUMilli, r.MemoryBytes, r.DiskBytes, r != l,
		t.Restarts, nzInt(t.Pid), eventType, nzInt(at.submitTime), nzInt(t.StartedUS),
		nz(t.Health.String()), nz(t.HealthMessage), nzInt(t.HealthyUS),
		at.time, at.position,
	}
}

func machineRow(m *projections.Machine, at touch) row {
	c := m.Capacity
	return row{
		m.Name, nz(m.Address), c.CPUMilli, c.MemoryBytes, c.DiskBytes, int32(c.Ports), c.GPUMilli,
		labelsValue(m.Attributes), m.State.String(), m.Draining, nz(m.Reason), at.time, at.position,
	}
}

func allocRow(a *projections.Alloc, at touch) row {
	set, r, u := a.Set, a.Set.Resources, a.Used
	return row{
		set.User, set.Name, a.Index, nz(a.Machine), set.Priority, bandOf(set.Priority),
		r.CPUMilli, r.MemoryBytes, r.DiskBytes, r.GPUMilli, int32(r.Ports),
		u.CPUMilli, u.MemoryBytes, u.DiskBytes, u.GPUMilli,
		at.time, at.position,
	}
}
