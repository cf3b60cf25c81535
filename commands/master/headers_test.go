package master

import (
	"testing"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/client"
)

// The one client and the masters name the caller and the leader alike.
func TestClientHeadersAreTheMasters(t *testing.T) {
	if client.UserHeader != UserHeader || client.LeaderHeader != LeaderHeader {
		t.Fatalf("client headers %q %q, masters %q %q", client.UserHeader, client.LeaderHeader, UserHeader, LeaderHeader)
	}
}

// An agent follows a follower to the leader by the masters' trailer.
func TestAgentLeaderHeaderIsTheMasters(t *testing.T) {
	if agent.LeaderHeader != LeaderHeader {
		t.Fatalf("agent.LeaderHeader %q, masters %q", agent.LeaderHeader, LeaderHeader)
	}
}
