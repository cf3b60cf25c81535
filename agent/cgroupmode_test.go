package agent

import (
	"testing"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/agent/cgroup"
)

// Every cgroup mode the agent runs in crosses the wire and comes back as
// its own name: the agent's configuration, its metrics and the master's
// machine view say the same word.
func TestCgroupModeRoundTrip(t *testing.T) {
	for _, m := range []cgroup.Mode{cgroup.ModeV1, cgroup.ModeV2, cgroup.ModeSampling} {
		wire := cgroupMode(m)
		if wire == agentpb.CgroupMode_CGROUP_MODE_UNSPECIFIED || wire.Label() != string(m) {
			t.Errorf("%s: on the wire %v, labelled %q", m, wire, wire.Label())
		}
	}
	if l := agentpb.CgroupMode_CGROUP_MODE_UNSPECIFIED.Label(); l != "" {
		t.Errorf("unspecified is labelled %q", l)
	}
}
