package history

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/events/golden"
)

var rewrite = flag.Bool("rewrite", false, "write the golden histories again")

// dir is where the projections' tests read them.
var dir = filepath.Join("..", "..", "projections", "testdata", "histories")

// TestGoldenHistories: the committed golden histories are what the
// generator writes today. When a change to the commands changes what they
// decide, this fails: look at why, then run it with -rewrite.
func TestGoldenHistories(t *testing.T) {
	if *rewrite {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range Goldens {
		var want bytes.Buffer
		if err := golden.Write(&want, g.Generate()); err != nil {
			t.Fatal(err)
		}
		if *rewrite {
			if err := os.WriteFile(g.Path(dir), want.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(g.Path(dir))
		if err != nil {
			t.Fatalf("%v (write the golden histories with: go test ./internal/history -run TestGoldenHistories -rewrite)", err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s differs from what the generator writes now: if the commands' decisions changed on purpose, "+
				"go test ./internal/history -run TestGoldenHistories -rewrite", g.Name())
		}
	}
}

// TestGoldenRoundTrip: a history reads back as written.
func TestGoldenRoundTrip(t *testing.T) {
	evs := Golden{Seed: 3, Events: 400}.Generate()
	var buf bytes.Buffer
	if err := golden.Write(&buf, evs); err != nil {
		t.Fatal(err)
	}
	back, err := golden.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := golden.Write(&again, back); err != nil {
		t.Fatal(err)
	}
	if len(back) != len(evs) || back[len(back)-1].Position != evs[len(evs)-1].Position {
		t.Fatalf("read %d events, wrote %d", len(back), len(evs))
	}
	var first bytes.Buffer
	_ = golden.Write(&first, evs)
	if !bytes.Equal(first.Bytes(), again.Bytes()) {
		t.Fatal("a history read back writes other bytes")
	}
}
