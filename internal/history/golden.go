package history

import (
	"fmt"
	"path/filepath"

	"github.com/corralhq/corral/events"
)

// Golden is one golden history: the first Events events of the Small cell
// with Seed.
type Golden struct {
	Seed   uint64
	Events int64
}

// Goldens are the histories under projections/testdata/histories.
var Goldens = func() []Golden {
	var out []Golden
	for seed := uint64(1); seed <= 8; seed++ {
		out = append(out, Golden{Seed: seed, Events: 3500})
	}
	return out
}()

// Name is the golden history's file name.
func (g Golden) Name() string { return fmt.Sprintf("small-%d.jsonl.gz", g.Seed) }

// Path is the file under dir.
func (g Golden) Path(dir string) string { return filepath.Join(dir, g.Name()) }

// Generate runs the cell and returns the history.
func (g Golden) Generate() []events.Event {
	c := New(Small, g.Seed)
	c.Run(g.Events)
	return c.Log[:g.Events]
}
