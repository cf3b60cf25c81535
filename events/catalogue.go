package events

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"
)

// Payload is the body of an event: one of the catalogue's messages.
type Payload interface {
	proto.Message
}

// TraceCode is an event code of the public Google cluster trace's task_events
// and job_events tables. NoTraceCode marks events that have no such code.
type TraceCode int

const (
	NoTraceCode         TraceCode = -1
	TraceSubmit         TraceCode = 0
	TraceSchedule       TraceCode = 1
	TraceEvict          TraceCode = 2
	TraceFail           TraceCode = 3
	TraceFinish         TraceCode = 4
	TraceKill           TraceCode = 5
	TraceLost           TraceCode = 6
	TraceUpdatePending  TraceCode = 7
	TraceUpdateRunning  TraceCode = 8
	traceCodeUnresolved TraceCode = -2 // decided by the payload (TaskUpdated)
)

// MachineTraceCode is an event code of the trace's machine_events table.
type MachineTraceCode int

const (
	TraceMachineAdd    MachineTraceCode = 0 // registered, or back up
	TraceMachineRemove MachineTraceCode = 1 // down, or removed
	TraceMachineUpdate MachineTraceCode = 2 // its attributes or capacity changed
)

// String names the code as the trace's documentation does.
func (c MachineTraceCode) String() string {
	switch c {
	case TraceMachineAdd:
		return "ADD"
	case TraceMachineRemove:
		return "REMOVE"
	case TraceMachineUpdate:
		return "UPDATE"
	}
	return fmt.Sprintf("MachineTraceCode(%d)", int(c))
}

// String names the code as the trace's documentation does.
func (c TraceCode) String() string {
	switch c {
	case TraceSubmit:
		return "SUBMIT"
	case TraceSchedule:
		return "SCHEDULE"
	case TraceEvict:
		return "EVICT"
	case TraceFail:
		return "FAIL"
	case TraceFinish:
		return "FINISH"
	case TraceKill:
		return "KILL"
	case TraceLost:
		return "LOST"
	case TraceUpdatePending:
		return "UPDATE_PENDING"
	case TraceUpdateRunning:
		return "UPDATE_RUNNING"
	}
	return "NONE"
}

// Upcaster turns the encoded payload of schema version N-1 into the encoded
// payload of version N. Registered per (type, N).
type Upcaster func(old []byte) ([]byte, error)

// Kind describes one event type of the catalogue.
type Kind struct {
	Type          string    // the stored type name; equal to the message name
	SchemaVersion int32     // the version new events are written with
	TraceCode     TraceCode // the Google trace event code, or NoTraceCode
	new           func() Payload
	upcasters     map[int32]Upcaster // key: the version produced
}

// New returns an empty payload of this kind.
func (k *Kind) New() Payload { return k.new() }

var kinds = map[string]*Kind{}

func register(p Payload, code TraceCode) {
	name := string(p.ProtoReflect().Descriptor().Name())
	msg := p
	kinds[name] = &Kind{
		Type:          name,
		SchemaVersion: 1,
		TraceCode:     code,
		new:           func() Payload { return msg.ProtoReflect().New().Interface() },
		upcasters:     map[int32]Upcaster{},
	}
}

func init() {
	// Package init runs files in name order: make sure the generated
	// descriptors exist before reading message names from them.
	file_catalogue_proto_init()
	for _, e := range []struct {
		p    Payload
		code TraceCode
	}{
		{&MachineRegistered{}, NoTraceCode},
		{&MachineUpdated{}, NoTraceCode},
		{&MachineDrainSet{}, NoTraceCode},
		{&MachineDown{}, NoTraceCode},
		{&MachineUp{}, NoTraceCode},
		{&MachineLossHeld{}, NoTraceCode},
		{&MachineRemoved{}, NoTraceCode},
		{&QuotaSet{}, NoTraceCode},
		{&JobSubmitted{}, TraceSubmit},
		{&JobUpdated{}, TraceUpdatePending},
		{&JobUpdateCommitted{}, NoTraceCode},
		{&JobUpdateRolledBack{}, NoTraceCode},
		{&JobUpdateHalted{}, NoTraceCode},
		{&JobUpdatePromoted{}, NoTraceCode},
		{&JobKilled{}, TraceKill},
		{&JobFinished{}, TraceFinish},
		{&AllocSetCreated{}, NoTraceCode},
		{&AllocSetRemoved{}, NoTraceCode},
		{&AllocScheduled{}, NoTraceCode},
		{&AllocEvicted{}, NoTraceCode},
		{&TaskSubmitted{}, TraceSubmit},
		{&TaskScheduled{}, TraceSchedule},
		{&TaskStarted{}, NoTraceCode},
		{&TaskEvicted{}, TraceEvict},
		{&TaskFailed{}, TraceFail},
		{&TaskFinished{}, TraceFinish},
		{&TaskKilled{}, TraceKill},
		{&TaskLost{}, TraceLost},
		{&TaskStopped{}, NoTraceCode},
		{&TaskUpdated{}, traceCodeUnresolved},
		{&TaskHealthChanged{}, NoTraceCode},
		{&PendingReasonsChanged{}, NoTraceCode},
		{&UsageReported{}, NoTraceCode},
		{&ReservationEstimated{}, NoTraceCode},
		{&PriceSheetSet{}, NoTraceCode},
		{&BillingPeriodClosed{}, NoTraceCode},
		{&LeaderElected{}, NoTraceCode},
		{&CheckpointWritten{}, NoTraceCode},
		{&CommandRefused{}, NoTraceCode},
	} {
		register(e.p, e.code)
	}
}

// Lookup returns the kind of a stored type name.
func Lookup(typ string) (*Kind, bool) {
	k, ok := kinds[typ]
	return k, ok
}

// Types lists every type name of the catalogue, sorted.
func Types() []string {
	out := make([]string, 0, len(kinds))
	for t := range kinds {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// TypeOf returns the stored type name of a payload.
func TypeOf(p Payload) string {
	return string(p.ProtoReflect().Descriptor().Name())
}

// TraceCodeOf returns the Google trace code of a payload: the kind's code, or
// for TaskUpdated, UPDATE_RUNNING or UPDATE_PENDING by whether the task runs.
func TraceCodeOf(p Payload) TraceCode {
	if u, ok := p.(*TaskUpdated); ok {
		if u.Running {
			return TraceUpdateRunning
		}
		return TraceUpdatePending
	}
	k, ok := kinds[TypeOf(p)]
	if !ok {
		return NoTraceCode
	}
	return k.TraceCode
}

// RegisterUpcaster bumps typ's schema version to `to` and registers the
// function that rewrites a payload of version to-1 into version to. It is
// meant for package init of the catalogue; it panics on misuse so a wrong
// catalogue never starts.
func RegisterUpcaster(typ string, to int32, up Upcaster) {
	k, ok := kinds[typ]
	if !ok {
		panic(fmt.Sprintf("events: upcaster for unknown type %q", typ))
	}
	if to != k.SchemaVersion+1 {
		panic(fmt.Sprintf("events: upcaster for %s must produce version %d, not %d", typ, k.SchemaVersion+1, to))
	}
	k.upcasters[to] = up
	k.SchemaVersion = to
}
