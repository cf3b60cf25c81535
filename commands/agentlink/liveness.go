package agentlink

import "time"

// Loss holds: when many machines stop answering at once, the fault is far
// more likely the master's own (a GC pause, a restart, a starved host) or
// the network's than that of half a cell's machines failing together, and
// marking them down would kill every service for nothing. Kubernetes' node
// lifecycle controller reasons the same way: a zone with 55% or more of its
// nodes not ready (unhealthyZoneThreshold) is disrupted, and evictions
// there slow down or stop.
const (
	// LossHoldPercent is the share of a cell's live machines whose last
	// poll went unanswered at which the link holds machine loss:
	// Kubernetes' 0.55. Real failures that take more than half a cell at once (a power
	// domain) are rare enough that waiting them out costs less than the
	// false alarms; a rack is a few percent of a Borg cell.
	LossHoldPercent = 55
	// LossHoldMin is the fewest unanswered machines that hold: one
	// machine alone is never the master's fault, even in a cell of one or
	// two.
	LossHoldMin = 2
)

// HoldLoss says whether the link, with missing of the cell's machines (not
// down) unanswered at their last poll, holds machine loss: it marks no
// machine down, so the scheduler moves no task, until fewer miss.
func HoldLoss(missing, machines int) bool {
	return missing >= LossHoldMin && missing*100 >= LossHoldPercent*machines
}

// LossRule says when a machine's unanswered polls mark it down.
type LossRule struct {
	Interval time.Duration // between polls of a machine
	// MissedPolls unanswered in a row (Borg's three) that count ...
	MissedPolls int
	// ... and Silence since the machine last answered (or since its
	// misses began to count): a machine is down only after this much real
	// time without an answer, whatever the count.
	Silence time.Duration
}

// Silence is a machine's current run of unanswered polls, as they count
// against it.
type Silence struct {
	Misses int       // unanswered polls in a row that counted
	From   time.Time // when they began to count (see CountFrom)
}

// CountFrom is the moment from which a machine's unanswered polls count
// against it: its last answer, the end of this leader's grace (its
// connections are new, agents may not know it yet), the end of the last
// loss hold (misses counted while the master itself was in trouble start
// over), whichever is last.
func CountFrom(lastAnswer, graceEnd, holdEnd time.Time) time.Time {
	from := lastAnswer
	if graceEnd.After(from) {
		from = graceEnd
	}
	if holdEnd.After(from) {
		from = holdEnd
	}
	return from
}

// Late says whether a poll was started late by the master itself: the
// pass of the link's loop that started it woke lag after it meant to (a GC
// pause, a starved process, a restart's catching up), by more than half an
// interval. Such a poll going unanswered says nothing of the machine. A
// poll that waited for a free slot is not late: many silent machines are
// theirs to answer for.
func (r LossRule) Late(lag time.Duration) bool {
	return lag > r.Interval/2
}

// Miss counts, at now, one unanswered poll of a machine, started at
// started by a pass lag late, with from its CountFrom, and says whether
// the machine is now unreachable: MissedPolls counted misses and Silence
// since from. A poll started before from, started late (Late), or while
// the link holds machine loss counts nothing; a from later than the run's
// start begins a new run. The link then marks the machine down, unless it
// is already, and forgets its last report: its next answer is a first
// contact.
func (r LossRule) Miss(s *Silence, started time.Time, lag time.Duration, from, now time.Time, held bool) bool {
	if from.After(s.From) {
		s.Misses, s.From = 0, from
	}
	if held || started.Before(from) || r.Late(lag) {
		return false
	}
	s.Misses++
	return s.Misses >= r.MissedPolls && now.Sub(from) >= r.Silence
}
