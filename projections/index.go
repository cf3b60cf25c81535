package projections

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

func (s *State) indexJob(j *Job) {
	u := s.byUser[j.User]
	if u == nil {
		u = map[string]*Job{}
		s.byUser[j.User] = u
	}
	u[j.Name] = j
	s.indexLabels(j)
	if !j.Dead() {
		s.live[j] = struct{}{}
	}
	if j.Deferred {
		key := JobKey{j.User, j.startAfter()}
		w := s.waiting[key]
		if w == nil {
			w = map[*Job]struct{}{}
			s.waiting[key] = w
		}
		w[j] = struct{}{}
	}
}

// forgetJob drops a dead job whose name is taken by a new one.
func (s *State) forgetJob(j *Job) {
	delete(s.byUser[j.User], j.Name)
	if len(s.byUser[j.User]) == 0 {
		delete(s.byUser, j.User)
	}
	s.unindexLabels(j)
	s.unwait(j)
	delete(s.live, j)
	delete(s.Jobs, j.Key())
	if s.lastJob == j {
		s.lastJob = nil
	}
}

// startAfter is the job the first spec version waits for: start_after
// cannot change once submitted, and the first version is never dropped.
func (j *Job) startAfter() string { return j.Versions[0].Spec.GetStartAfter() }

func (s *State) unwait(j *Job) {
	key := JobKey{j.User, j.startAfter()}
	if w := s.waiting[key]; w != nil {
		delete(w, j)
		if len(w) == 0 {
			delete(s.waiting, key)
		}
	}
}

func (s *State) indexLabels(j *Job) {
	for k, v := range j.Labels() {
		byValue := s.labels[k]
		if byValue == nil {
			byValue = map[string]map[*Job]struct{}{}
			s.labels[k] = byValue
		}
		set := byValue[v]
		if set == nil {
			set = map[*Job]struct{}{}
			byValue[v] = set
		}
		set[j] = struct{}{}
	}
}

func (s *State) unindexLabels(j *Job) {
	for k, v := range j.Labels() {
		set := s.labels[k][v]
		delete(set, j)
		if len(set) == 0 {
			delete(s.labels[k], v)
			if len(s.labels[k]) == 0 {
				delete(s.labels, k)
			}
		}
	}
}

// rebuild derives the indexes, the back pointers, the machines' sums and
// the jobs' counters and charges from the primary fields.
func (s *State) rebuild() {
	s.resetIndexes()
	for _, m := range s.Machines {
		m.tasks, m.allocs = map[*Task]struct{}{}, map[*Alloc]struct{}{}
		m.Limits, m.Reserved = Resources{}, Resources{}
		for _, h := range m.stopping {
			m.Limits, m.Reserved = m.Limits.Add(h.Limit), m.Reserved.Add(h.Reservation)
		}
	}
	s.Charged = map[UserBand]Resources{}
	for _, set := range s.AllocSets {
		set.Charge, set.ChargeBand = set.Resources.Scale(int64(len(set.Allocs))), BandOf(set.Priority)
		ub := UserBand{set.User, set.ChargeBand}
		setOrDelete(s.Charged, ub, s.Charged[ub].Add(set.Charge))
		for _, a := range set.Allocs {
			a.Set, a.tasks, a.Used, a.machine = set, map[*Task]struct{}{}, Resources{}, nil
			if m := s.Machines[a.Machine]; m != nil && a.Machine != "" {
				a.machine = m
				m.allocs[a] = struct{}{}
				m.Limits = m.Limits.Add(set.Resources)
				m.Reserved = m.Reserved.Add(set.Resources)
			} else {
				a.Machine = ""
				s.pendingAllocs[a] = struct{}{}
			}
		}
	}
	for _, j := range s.Jobs {
		j.live, j.pending = 0, 0
		s.UpdatesChangedPos = max(s.UpdatesChangedPos, j.ChangedPos)
		s.indexJob(j)
		s.charge(j)
		for _, t := range j.Tasks {
			if t == nil {
				continue
			}
			t.Job, t.machine, t.alloc = j, nil, nil
			switch t.State {
			case TaskPending:
				j.pending++
				s.pending[t] = struct{}{}
			case TaskScheduled, TaskRunning:
				j.live++
				m := s.Machines[t.Machine]
				if m == nil {
					continue
				}
				t.machine = m
				m.tasks[t] = struct{}{}
				var a *Alloc
				if set := s.AllocSets[JobKey{j.User, t.Spec().GetAllocSet()}]; set != nil && t.AllocIndex >= 0 && int(t.AllocIndex) < len(set.Allocs) {
					a = set.Allocs[t.AllocIndex]
				}
				if a != nil {
					t.alloc = a
					a.tasks[t] = struct{}{}
					a.Used = a.Used.Add(t.Limit)
				} else {
					m.Limits = m.Limits.Add(t.Limit)
					m.Reserved = m.Reserved.Add(t.Reservation)
				}
			}
		}
	}
}

// CheckIndexes rebuilds a copy of s from its checkpoint encoding and
// reports the first derived field (index, sum, counter, charge) that the
// incremental folds got wrong. For tests; it costs a full encode and decode.
func (s *State) CheckIndexes() error {
	c, err := Decode(Encode(s))
	if err != nil {
		return err
	}
	for _, check := range []func(*State) error{s.checkPlacements, s.checkCharges, s.checkJobIndexes, s.checkLiveJobs} {
		if err := check(c); err != nil {
			return err
		}
	}
	return nil
}

func taskKeys(m map[*Task]struct{}) []TaskKey {
	out := make([]TaskKey, 0, len(m))
	for t := range m {
		out = append(out, t.Key())
	}
	slices.SortFunc(out, compareTaskKeys)
	return out
}

func jobKeys(m map[*Job]struct{}) []string {
	var out []string
	for j := range m {
		out = append(out, j.Key().String())
	}
	slices.Sort(out)
	return out
}

// checkPlacements compares s's pending index and machines with c's.
func (s *State) checkPlacements(c *State) error {
	if got, want := taskKeys(s.pending), taskKeys(c.pending); !slices.Equal(got, want) {
		return fmt.Errorf("pending index: %v, rebuilt %v", got, want)
	}
	if !maps.Equal(s.Charged, c.Charged) {
		return fmt.Errorf("charged: %v, rebuilt %v", s.Charged, c.Charged)
	}
	for name, m := range s.Machines {
		cm := c.Machines[name]
		if m.Limits != cm.Limits || m.Reserved != cm.Reserved {
			return fmt.Errorf("machine %s: limits %v reserved %v, rebuilt %v and %v", name, m.Limits, m.Reserved, cm.Limits, cm.Reserved)
		}
		if got, want := taskKeys(m.tasks), taskKeys(cm.tasks); !slices.Equal(got, want) {
			return fmt.Errorf("machine %s tasks: %v, rebuilt %v", name, got, want)
		}
		if len(m.allocs) != len(cm.allocs) {
			return fmt.Errorf("machine %s: %d allocs, rebuilt %d", name, len(m.allocs), len(cm.allocs))
		}
		for t := range m.tasks {
			if t.machine != m {
				return fmt.Errorf("task %s: indexed on %s, points elsewhere", t.Key(), name)
			}
		}
	}
	return nil
}

// checkCharges compares the counters and charges of s's jobs and allocs
// with c's.
func (s *State) checkCharges(c *State) error {
	for key, j := range s.Jobs {
		cj := c.Jobs[key]
		if j.live != cj.live || j.pending != cj.pending || j.Charge != cj.Charge {
			return fmt.Errorf("job %s: live %d pending %d charge %v, rebuilt %d %d %v", key, j.live, j.pending, j.Charge, cj.live, cj.pending, cj.Charge)
		}
	}
	for key, set := range s.AllocSets {
		cs := c.AllocSets[key]
		for i, a := range set.Allocs {
			if a.Used != cs.Allocs[i].Used || len(a.tasks) != len(cs.Allocs[i].tasks) {
				return fmt.Errorf("alloc %s/%d: used %v, rebuilt %v", key, i, a.Used, cs.Allocs[i].Used)
			}
		}
	}
	if len(s.pendingAllocs) != len(c.pendingAllocs) {
		return fmt.Errorf("pending allocs: %d, rebuilt %d", len(s.pendingAllocs), len(c.pendingAllocs))
	}
	return nil
}

// checkJobIndexes compares s's label, prerequisite and user indexes with
// c's.
func (s *State) checkJobIndexes(c *State) error {
	if len(s.labels) != len(c.labels) {
		return fmt.Errorf("label index: %d keys, rebuilt %d", len(s.labels), len(c.labels))
	}
	for k, byValue := range s.labels {
		if len(byValue) != len(c.labels[k]) {
			return fmt.Errorf("label index %s: %d values, rebuilt %d", k, len(byValue), len(c.labels[k]))
		}
		for v, set := range byValue {
			if got, want := jobKeys(set), jobKeys(c.labels[k][v]); !slices.Equal(got, want) {
				return fmt.Errorf("label index %s=%s: %v, rebuilt %v", k, v, got, want)
			}
		}
	}
	if len(s.waiting) != len(c.waiting) {
		return fmt.Errorf("waiting index: %d prerequisites, rebuilt %d", len(s.waiting), len(c.waiting))
	}
	for k, set := range s.waiting {
		if got, want := jobKeys(set), jobKeys(c.waiting[k]); !slices.Equal(got, want) {
			return fmt.Errorf("waiting on %s: %v, rebuilt %v", k, got, want)
		}
	}
	for u, jobs := range s.byUser {
		if len(jobs) != len(c.byUser[u]) {
			return fmt.Errorf("jobs of %s: %d, rebuilt %d", u, len(jobs), len(c.byUser[u]))
		}
	}
	if len(s.byUser) != len(c.byUser) {
		return fmt.Errorf("users: %d, rebuilt %d", len(s.byUser), len(c.byUser))
	}
	return nil
}

// checkLiveJobs compares s's live-job index with c's and with s.Jobs.
func (s *State) checkLiveJobs(c *State) error {
	liveKeys := func(st *State) []JobKey {
		out := make([]JobKey, 0, len(st.live))
		for j := range st.live {
			out = append(out, j.Key())
		}
		slices.SortFunc(out, func(a, b JobKey) int { return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Name, b.Name)) })
		return out
	}
	if got, want := liveKeys(s), liveKeys(c); !slices.Equal(got, want) {
		return fmt.Errorf("live jobs: %v, rebuilt %v", got, want)
	}
	for j := range s.live {
		if j.Dead() || s.Jobs[j.Key()] != j {
			return fmt.Errorf("live jobs index holds %s, dead or forgotten", j.Key())
		}
	}
	return nil
}
