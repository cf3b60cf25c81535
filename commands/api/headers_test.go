package api

import (
	"testing"

	"github.com/corralhq/corral/commands/client"
)

// The one client and the API name the caller alike.
func TestClientUserHeaderIsTheAPIs(t *testing.T) {
	if client.UserHeader != UserHeader {
		t.Fatalf("client.UserHeader %q, the API's %q", client.UserHeader, UserHeader)
	}
}
