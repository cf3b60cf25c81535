package auth_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/auth"
)

func TestStreamCaps(t *testing.T) {
	c := &auth.StreamCaps{PerUser: 2, Total: 3}
	var releases []func()
	open := func(user string) error {
		rel, err := c.Open(user)
		if err == nil {
			releases = append(releases, rel)
		}
		return err
	}
	for range 2 {
		if err := open("bob"); err != nil {
			t.Fatalf("bob's first streams: %v", err)
		}
	}
	// bob's third is past the cap per user, and says which cap.
	err := open("bob")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-streams-per-user 2") || !strings.Contains(err.Error(), "bob has 2 streams open") {
		t.Fatalf("bob's third stream: %v, want ResourceExhausted naming the cap per user", err)
	}
	if err := open("carol"); err != nil {
		t.Fatalf("carol's first stream: %v", err)
	}
	// The cell is full: dave, who holds none, is refused by the cell's cap.
	err = open("dave")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-streams 3") {
		t.Fatalf("dave's stream in a full cell: %v, want ResourceExhausted naming the cell's cap", err)
	}
	// A refusal took nothing; a release gives back once however often it
	// is called: bob's slot goes to dave, and the cell is full again.
	releases[0]()
	releases[0]()
	if err := open("dave"); err != nil {
		t.Errorf("dave after a release: %v", err)
	}
	if err := open("erin"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("erin in a full cell: %v (a release given back twice?)", err)
	}
	// Every slot given back: bob may hold his two again.
	for _, rel := range releases {
		rel()
	}
	for range 2 {
		if err := open("bob"); err != nil {
			t.Errorf("bob after every release: %v", err)
		}
	}
	// No caps, or no StreamCaps at all: nothing is refused.
	var none *auth.StreamCaps
	for _, c := range []*auth.StreamCaps{{}, none} {
		for range 100 {
			if _, err := c.Open("bob"); err != nil {
				t.Fatalf("uncapped: %v", err)
			}
		}
	}
}
