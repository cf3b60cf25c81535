package commands

import (
	"regexp"
	"unicode"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// machineRE: a host name.
var machineRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9._]*[a-z0-9])?$`)

const maxMachineName = 253

// checkMachineFields validates what RegisterMachine and UpdateMachine share.
func checkMachineFields(v *violations, address string, capacity projections.Resources, attrs map[string]string, portBase int32) {
	if address == "" {
		v.add("address", "must be set: the agent's host:port")
	}
	if capacity.CPUMilli <= 0 {
		v.add("capacity.cpu", "must be > 0")
	}
	if capacity.MemoryBytes <= 0 {
		v.add("capacity.memory", "must be > 0")
	}
	if capacity.DiskBytes < 0 {
		v.add("capacity.disk", "must be >= 0")
	}
	if capacity.GPUMilli < 0 {
		v.add("capacity.gpu", "must be >= 0")
	}
	for _, d := range []struct {
		name string
		v    int64
	}{{"cpu", capacity.CPUMilli}, {"memory", capacity.MemoryBytes}, {"disk", capacity.DiskBytes}, {"gpu", capacity.GPUMilli}} {
		if d.v > events.MaxTotal {
			v.add("capacity."+d.name, "%d is more than any total the cell keeps (%d)", d.v, int64(events.MaxTotal))
		}
	}
	base := int64(portBase)
	if base == 0 {
		base = projections.DefaultPortBase
	}
	if portBase < 0 || portBase > 65535 {
		v.add("port_base", "must be a port number (0: the default, %d)", projections.DefaultPortBase)
	} else if capacity.Ports < 0 || base+capacity.Ports > 65536 {
		v.add("capacity.ports", "%d ports from %d run past port 65535", capacity.Ports, base)
	}
	for _, k := range sortedKeys(attrs) {
		if !events.ValidLabelKey(k) {
			v.add(join("attributes", k), "%q is not an attribute name", k)
		}
		val := attrs[k]
		if len(val) > maxMachineName {
			v.add(join("attributes", k), "value longer than %d bytes", maxMachineName)
		}
		for _, r := range val {
			if !unicode.IsPrint(r) {
				v.add(join("attributes", k), "value has a non-printable character")
				break
			}
		}
	}
}

func checkMachineName(v *violations, name string) {
	switch {
	case name == "":
		v.add("machine", "must be set")
	case len(name) > maxMachineName || !machineRE.MatchString(name):
		v.add("machine", "%q is not a host name: lowercase letters, digits, '-', '.' and '_'", name)
	}
}

// clearMachine moves every task and alloc off a machine: tasks are evicted
// (drain) or lost (down, removed) and resubmitted when their jobs still
// want them; allocs become pending again.
func (b *draft) clearMachine(m *projections.Machine, evict bool, reason string) {
	for _, t := range m.Tasks() {
		if b.dead(t) {
			continue
		}
		if evict {
			b.evict(t, reason, "", nil, true)
		} else {
			b.lose(t, reason)
		}
	}
	for _, a := range m.Allocs() {
		b.add(events.AllocSetStream(a.Set.User, a.Set.Name), &events.AllocEvicted{User: a.Set.User, Name: a.Set.Name, Index: a.Index, Machine: m.Name, Reason: reason})
	}
}
