package projections

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/corralhq/corral/events"
	"google.golang.org/protobuf/proto"
)

// The checkpoint encoding is hand-written: varints in a fixed field order,
// maps and sets sorted, so equal states encode to equal bytes and a cell of
// 100,000 tasks encodes in milliseconds. Only primary fields are written;
// indexes, back pointers, sums, counters, charges and task limits are
// derived again on decode. Job specs are embedded as deterministic
// protobuf, which the catalogue already keeps compatible.
//
// A change of layout bumps codecVersion; Decode refuses other versions and
// Load then replays from an older checkpoint or from the start.

var codecMagic = [4]byte{'c', 'r', 's', 't'}

const codecVersion = 9

// ErrCheckpoint: a checkpoint's bytes are not a state this build can read.
var ErrCheckpoint = errors.New("projections: unreadable checkpoint")

// Encode returns s's checkpoint encoding.
func Encode(s *State) []byte {
	e := &encoder{buf: make([]byte, 0, 64+len(s.Machines)*96+len(s.Jobs)*256+len(s.pending)*16)}
	e.buf = append(e.buf, codecMagic[:]...)
	e.uint(codecVersion)
	e.int(s.Position)
	e.int(s.TimeUS)
	e.int(s.Skipped)
	e.str(s.Leader)
	e.int(s.LeaderEpoch)
	e.str(s.LeaderAddress)

	e.uint(uint64(len(s.Machines)))
	for _, m := range s.SortedMachines() {
		e.machine(m)
	}
	e.quotas(s.Quotas)
	sets := slices.SortedFunc(maps.Values(s.AllocSets), func(a, b *AllocSet) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Name, b.Name))
	})
	e.uint(uint64(len(sets)))
	for _, set := range sets {
		e.allocSet(set)
	}

	e.uint(uint64(len(s.Jobs)))
	for _, j := range s.SortedJobs() {
		e.job(j)
	}

	e.uint(uint64(len(s.PriceSheets)))
	for _, p := range s.PriceSheets {
		e.int(p.Position)
		e.int(p.SetUS)
		e.proto(p.Sheet)
	}
	closed := slices.Sorted(maps.Keys(s.ClosedPeriods))
	e.uint(uint64(len(closed)))
	for _, start := range closed {
		e.int(start)
		e.int(s.ClosedPeriods[start])
	}
	return e.buf
}

func (e *encoder) machine(m *Machine) {
	e.str(m.Name)
	e.str(m.Address)
	e.res(m.Capacity)
	e.strMap(m.Attributes)
	e.int(int64(m.PortBase))
	e.uint(uint64(m.State))
	e.bool(m.Draining)
	e.str(m.Reason)
	e.int(m.Version)
	runs := m.StoppingRuns()
	e.uint(uint64(len(runs)))
	for _, r := range runs {
		h := m.stopping[r]
		e.taskRun(r)
		e.res(h.Limit)
		e.res(h.Reservation)
		e.int(h.SinceUS)
	}
	e.int(m.UsageEndUS)
	spans := slices.SortedFunc(maps.Keys(m.spans), compareRuns)
	e.uint(uint64(len(spans)))
	for _, r := range spans {
		sp := m.spans[r]
		e.taskRun(r)
		e.int(sp.startUS)
		e.int(sp.stopUS)
	}
}

func (e *encoder) taskRun(r TaskRun) {
	e.str(r.User)
	e.str(r.Job)
	e.int(int64(r.Index))
	e.int(r.Submission)
}

func (e *encoder) quotas(q map[UserBand]Resources) {
	keys := slices.SortedFunc(maps.Keys(q), func(a, b UserBand) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Band, b.Band))
	})
	e.uint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k.User)
		e.uint(uint64(k.Band))
		e.res(q[k])
	}
}

func (e *encoder) allocSet(set *AllocSet) {
	e.str(set.User)
	e.str(set.Name)
	e.int(int64(set.Priority))
	e.res(set.Resources)
	e.uint(uint64(len(set.Constraints)))
	for _, c := range set.Constraints {
		e.proto(c)
	}
	e.strMap(set.Labels)
	e.int(set.CreatedUS)
	e.uint(uint64(len(set.Allocs)))
	for _, a := range set.Allocs {
		e.str(a.Machine)
	}
}

func (e *encoder) job(j *Job) {
	e.str(j.User)
	e.str(j.Name)
	e.uint(uint64(len(j.Versions)))
	for i, v := range j.Versions {
		e.int(v.Version)
		// A rollback puts an earlier spec back under a new version: write
		// a reference instead of the spec again.
		ref := -1
		for k := 0; k < i; k++ {
			if j.Versions[k].Spec == v.Spec {
				ref = k
				break
			}
		}
		e.int(int64(ref))
		if ref < 0 {
			e.proto(v.Spec)
		}
	}
	e.int(j.Current)
	e.bool(j.Update != nil)
	if j.Update != nil {
		e.int(j.Update.From)
		e.int(j.Update.To)
		e.int(j.Update.SinceUS)
		e.str(j.Update.Halted)
		e.bool(j.Update.Promoted)
	}
	e.int(j.ChangedPos)
	e.int(j.LastUpdate.Version)
	e.str(j.LastUpdate.How)
	e.str(j.LastUpdate.Reason)
	e.uint(uint64(j.End))
	e.str(j.EndReason)
	e.bool(j.Deferred)
	e.int(j.SubmittedUS)
	e.int(j.EndedUS)
	e.uint(uint64(len(j.Tasks)))
	for _, t := range j.Tasks {
		e.bool(t != nil)
		if t != nil {
			e.task(t)
		}
	}
}

func (e *encoder) task(t *Task) {
	e.uint(uint64(t.State))
	e.uint(uint64(t.End))
	e.str(t.Reason)
	e.int(t.SpecVersion)
	e.str(t.Machine)
	e.int(int64(t.AllocIndex))
	e.uint(uint64(len(t.Ports)))
	for _, p := range t.Ports {
		e.int(int64(p))
	}
	e.int(int64(t.Restarts))
	e.int(int64(t.ExitCode))
	e.str(t.Signal)
	e.int(t.Pid)
	e.int(t.NotBeforeUS)
	e.int(int64(t.FailStreak))
	e.int(int64(t.RunsSeen))
	e.str(t.StoppingOn)
	e.int(t.StartedUS)
	e.int(t.RunStartUS)
	e.str(t.FailMessage)
	e.int(t.ReservationUS)
	// The limit is derived from the spec; the reservation equals it
	// until the estimator moves it.
	e.bool(t.Reservation != t.Limit)
	if t.Reservation != t.Limit {
		e.res(t.Reservation)
	}
	e.bool(t.Usage != Usage{})
	if t.Usage != (Usage{}) {
		u := t.Usage
		e.int(u.WindowStartUS)
		e.int(u.WindowEndUS)
		e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(u.CPUCoreSeconds))
		e.int(u.MemoryBytes)
		e.int(u.MemoryMaxBytes)
		e.int(u.DiskBytes)
	}
	e.bool(t.Replacing)
	e.uint(uint64(t.Health))
	e.str(t.HealthMessage)
	e.int(t.HealthyUS)
	e.int(t.SinceUS)
	e.int(t.Seq)
	e.str(t.WaitReason)
	e.str(t.WaitHint)
	e.uint(uint64(t.LastEnd))
	e.str(t.LastMachine)
}

type encoder struct{ buf []byte }

func (e *encoder) uint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) int(v int64)   { e.buf = binary.AppendVarint(e.buf, v) }
func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}
func (e *encoder) bool(b bool) {
	if b {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}
func (e *encoder) res(r Resources) {
	e.int(r.CPUMilli)
	e.int(r.MemoryBytes)
	e.int(r.DiskBytes)
	e.int(r.GPUMilli)
	e.int(r.Ports)
}
func (e *encoder) strMap(m map[string]string) {
	e.uint(uint64(len(m)))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.str(k)
		e.str(m[k])
	}
}
func (e *encoder) proto(m proto.Message) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		// Messages in the state were decoded from the log or built by
		// Decide; they always marshal.
		panic(fmt.Sprintf("projections: marshal %T: %v", m, err))
	}
	e.uint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

// Decode reads a checkpoint encoding into a new State with its indexes
// rebuilt. Bad input returns an error wrapping ErrCheckpoint, never a panic.
func Decode(b []byte) (*State, error) {
	d := &decoder{buf: b, intern: map[string]string{}}
	if len(b) < 4 || [4]byte(b[:4]) != codecMagic {
		return nil, fmt.Errorf("%w: not a corral state", ErrCheckpoint)
	}
	d.off = 4
	if v := d.uint(); v != codecVersion {
		return nil, fmt.Errorf("%w: encoding version %d, this build reads %d", ErrCheckpoint, v, codecVersion)
	}
	s := New()
	s.Position = d.int()
	s.TimeUS = d.int()
	s.Skipped = d.int()
	s.Leader = d.str()
	s.LeaderEpoch = d.int()
	s.LeaderAddress = d.str()

	for n := d.count(); n > 0 && d.err == nil; n-- {
		m := d.machine()
		s.Machines[m.Name] = m
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		ub := UserBand{User: d.istr(), Band: Band(d.small(3))}
		s.Quotas[ub] = d.res()
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		set := d.allocSet()
		s.AllocSets[set.Key()] = set
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		j := d.job()
		if j != nil {
			s.Jobs[j.Key()] = j
		}
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		p := PriceSheet{Position: d.int(), SetUS: d.int(), Sheet: &events.PriceSheetSet{}}
		d.proto(p.Sheet)
		s.PriceSheets = append(s.PriceSheets, p)
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		start := d.int()
		s.ClosedPeriods[start] = d.int()
	}
	if d.err == nil && d.off != len(b) {
		d.fail("%d bytes after the state", len(b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	s.rebuild()
	return s, nil
}

func (d *decoder) machine() *Machine {
	m := &Machine{Name: d.istr(), Address: d.str(), Capacity: d.res(), Attributes: d.strMap(), PortBase: int32(d.int()),
		State: MachineState(d.small(1)), Draining: d.bool(), Reason: d.str(), Version: d.int()}
	for k := d.count(); k > 0 && d.err == nil; k-- {
		if m.stopping == nil {
			m.stopping = map[TaskRun]Hold{}
		}
		r := d.taskRun()
		m.stopping[r] = Hold{Limit: d.res(), Reservation: d.res(), SinceUS: d.int()}
	}
	m.UsageEndUS = d.int()
	for k := d.count(); k > 0 && d.err == nil; k-- {
		if m.spans == nil {
			m.spans = map[TaskRun]span{}
		}
		r := d.taskRun()
		m.spans[r] = span{startUS: d.int(), stopUS: d.int()}
	}
	return m
}

func (d *decoder) taskRun() TaskRun {
	return TaskRun{TaskKey{User: d.istr(), Job: d.istr(), Index: int32(d.int())}, d.int()}
}

func (d *decoder) allocSet() *AllocSet {
	set := &AllocSet{User: d.istr(), Name: d.str(), Priority: int32(d.int()), Resources: d.res()}
	for k := d.count(); k > 0 && d.err == nil; k-- {
		c := &events.Constraint{}
		d.proto(c)
		set.Constraints = append(set.Constraints, c)
	}
	set.Labels = d.strMap()
	set.CreatedUS = d.int()
	count := d.count()
	set.Allocs = make([]*Alloc, 0, count)
	for i := 0; i < count && d.err == nil; i++ {
		set.Allocs = append(set.Allocs, &Alloc{Set: set, Index: int32(i), Machine: d.istr()})
	}
	return set
}

func (d *decoder) job() *Job {
	j := &Job{User: d.istr(), Name: d.str()}
	for n, i := d.count(), 0; i < n && d.err == nil; i++ {
		v := SpecVersion{Version: d.int()}
		if ref := d.int(); ref >= 0 && ref < int64(i) {
			v.Spec = j.Versions[ref].Spec
		} else {
			v.Spec = &events.JobSpec{}
			d.proto(v.Spec)
		}
		j.Versions = append(j.Versions, v)
	}
	j.Current = d.int()
	if d.bool() {
		j.Update = &Update{From: d.int(), To: d.int(), SinceUS: d.int(), Halted: d.str(), Promoted: d.bool()}
	}
	j.ChangedPos = d.int()
	j.LastUpdate = UpdateOutcome{Version: d.int(), How: d.istr(), Reason: d.str()}
	j.End = JobEnd(d.small(2))
	j.EndReason = d.str()
	j.Deferred = d.bool()
	j.SubmittedUS = d.int()
	j.EndedUS = d.int()
	n := d.count()
	if d.err != nil {
		return nil
	}
	j.Tasks = make([]*Task, n)
	for i := 0; i < n && d.err == nil; i++ {
		if !d.bool() {
			continue
		}
		t := d.task(j, int32(i))
		if t == nil {
			return nil
		}
		j.Tasks[i] = t
	}
	if d.err == nil && j.SpecOf(j.Current) == nil {
		d.fail("job %s: current spec version %d missing", j.Key(), j.Current)
	}
	return j
}

// task reads task index of j, or returns nil when its spec version is
// not one of j's.
func (d *decoder) task(j *Job, index int32) *Task {
	t := &Task{Job: j, Index: index}
	t.State = TaskState(d.small(3))
	t.End = TaskEnd(d.small(5))
	t.Reason = d.istr()
	t.SpecVersion = d.int()
	t.Machine = d.istr()
	t.AllocIndex = int32(d.int())
	if np := d.count(); np > 0 {
		t.Ports = make([]int32, np)
		for k := range t.Ports {
			t.Ports[k] = int32(d.int())
		}
	}
	t.Restarts = int32(d.int())
	t.ExitCode = int32(d.int())
	t.Signal = d.istr()
	t.Pid = d.int()
	t.NotBeforeUS = d.int()
	t.FailStreak = int32(d.int())
	t.RunsSeen = int32(d.int())
	t.StoppingOn = d.istr()
	t.StartedUS = d.int()
	t.RunStartUS = d.int()
	t.FailMessage = d.istr()
	t.ReservationUS = d.int()
	spec := j.SpecOf(t.SpecVersion)
	if spec == nil {
		d.fail("job %s task %d: spec version %d missing", j.Key(), index, t.SpecVersion)
		return nil
	}
	t.Limit = TaskLimit(spec, t.Index)
	t.Reservation = t.Limit
	if d.bool() {
		t.Reservation = d.res()
	}
	if d.bool() {
		t.Usage = Usage{WindowStartUS: d.int(), WindowEndUS: d.int(), CPUCoreSeconds: d.float(),
			MemoryBytes: d.int(), MemoryMaxBytes: d.int(), DiskBytes: d.int()}
	}
	t.Replacing = d.bool()
	t.Health = Health(d.small(2))
	t.HealthMessage = d.str()
	t.HealthyUS = d.int()
	t.SinceUS = d.int()
	t.Seq = d.int()
	t.WaitReason = d.istr()
	t.WaitHint = d.istr()
	t.LastEnd = TaskEnd(d.small(5))
	t.LastMachine = d.istr()
	return t
}

type decoder struct {
	buf    []byte
	off    int
	err    error
	intern map[string]string // machine names, users, reasons repeat per task
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", ErrCheckpoint, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uint() uint64 { return varint(d, binary.Uvarint) }

func (d *decoder) int() int64 { return varint(d, binary.Varint) }

// varint reads one varint with read, binary.Uvarint or binary.Varint.
func varint[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.buf[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// count reads a length that cannot exceed the bytes left, so corrupt input
// cannot make the decoder allocate more than the input's size.
func (d *decoder) count() int {
	v := d.uint()
	if v > uint64(len(d.buf)-d.off) {
		d.fail("count %d beyond the input", v)
		return 0
	}
	return int(v)
}

// small reads an enum value no larger than max.
func (d *decoder) small(max uint64) uint64 {
	v := d.uint()
	if v > max {
		d.fail("value %d out of range", v)
		return 0
	}
	return v
}

func (d *decoder) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	b := d.buf[d.off : d.off+n]
	d.off += n
	return b
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) istr() string {
	b := d.bytes()
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	d.intern[s] = s
	return s
}

func (d *decoder) bool() bool { return d.small(1) == 1 }

func (d *decoder) float() float64 {
	if d.err != nil {
		return 0
	}
	if len(d.buf)-d.off < 8 {
		d.fail("short float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.off:]))
	d.off += 8
	return v
}

func (d *decoder) res() Resources {
	return Resources{CPUMilli: d.int(), MemoryBytes: d.int(), DiskBytes: d.int(), GPUMilli: d.int(), Ports: d.int()}
}

func (d *decoder) strMap() map[string]string {
	n := d.count()
	if n == 0 || d.err != nil {
		return nil
	}
	m := make(map[string]string, n)
	for ; n > 0 && d.err == nil; n-- {
		k := d.istr()
		m[k] = d.istr()
	}
	return m
}

func (d *decoder) proto(m proto.Message) {
	b := d.bytes()
	if d.err != nil {
		return
	}
	if err := proto.Unmarshal(b, m); err != nil {
		d.fail("%T: %v", m, err)
	}
}
