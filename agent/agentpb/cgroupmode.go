package agentpb

// cgroupModeLabels names the wire's cgroup modes as the agent's
// configuration (cgroup.Mode), its metrics and the master's machine view
// write them: the one mapping.
var cgroupModeLabels = map[CgroupMode]string{
	CgroupMode_CGROUP_MODE_V1:       "v1",
	CgroupMode_CGROUP_MODE_V2:       "v2",
	CgroupMode_CGROUP_MODE_SAMPLING: "sampling",
}

// Label names the mode: "v1", "v2" or "sampling"; "" when unspecified.
func (m CgroupMode) Label() string { return cgroupModeLabels[m] }

// CgroupModeOf is the mode a label names; unspecified for any other.
func CgroupModeOf(label string) CgroupMode {
	for m, l := range cgroupModeLabels {
		if l == label {
			return m
		}
	}
	return CgroupMode_CGROUP_MODE_UNSPECIFIED
}
