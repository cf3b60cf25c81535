package master

import (
	"testing"

	"github.com/corralhq/corral/commands/client"
)

// The one client and the masters name the caller and the leader alike.
func TestClientHeadersAreTheMasters(t *testing.T) {
	if client.UserHeader != UserHeader || client.LeaderHeader != LeaderHeader {
		t.Fatalf("client headers %q %q, masters %q %q", client.UserHeader, client.LeaderHeader, UserHeader, LeaderHeader)
	}
}
