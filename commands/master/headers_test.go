package master

import (
	"testing"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/client"
)

// The one client and the masters name the leader alike.
func TestClientLeaderHeaderIsTheMasters(t *testing.T) {
	if client.LeaderHeader != LeaderHeader {
		t.Fatalf("client.LeaderHeader %q, masters %q", client.LeaderHeader, LeaderHeader)
	}
}

// An agent follows a follower to the leader by the masters' trailer.
func TestAgentLeaderHeaderIsTheMasters(t *testing.T) {
	if agent.LeaderHeader != LeaderHeader {
		t.Fatalf("agent.LeaderHeader %q, masters %q", agent.LeaderHeader, LeaderHeader)
	}
}
