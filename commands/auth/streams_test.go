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
		rel, err := c.Open(user, "log streams")
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
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-streams-per-user 2") || !strings.Contains(err.Error(), "bob has 2 log streams open") {
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
	if u, total := c.Held("bob"); u != 2 || total != 3 {
		t.Errorf("held: bob %d, cell %d; want 2 and 3", u, total)
	}
	// A refusal took nothing; a release gives back once however often it
	// is called.
	releases[0]()
	releases[0]()
	if u, total := c.Held("bob"); u != 1 || total != 2 {
		t.Errorf("after one release: bob %d, cell %d; want 1 and 2", u, total)
	}
	if err := open("dave"); err != nil {
		t.Errorf("dave after a release: %v", err)
	}
	for _, rel := range releases {
		rel()
	}
	if u, total := c.Held("bob"); u != 0 || total != 0 {
		t.Errorf("after every release: bob %d, cell %d", u, total)
	}
	// No caps, or no StreamCaps at all: nothing is refused.
	var none *auth.StreamCaps
	for _, c := range []*auth.StreamCaps{{}, none} {
		for range 100 {
			if _, err := c.Open("bob", "log streams"); err != nil {
				t.Fatalf("uncapped: %v", err)
			}
		}
	}
}
