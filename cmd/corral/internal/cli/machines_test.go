package cli

import (
	"testing"

	"github.com/corralhq/corral/commands/apipb"
)

// `machine list` says how many tasks a draining machine has left, and
// nothing more once it is empty.
func TestMachineListShowsTasksLeftToDrain(t *testing.T) {
	tab := machinesTable([]*apipb.MachineView{
		{Name: "m1", State: "up", Draining: true, Tasks: 2, Reason: "kernel upgrade"},
		{Name: "m2", State: "up", Draining: true},
		{Name: "m3", State: "up", Tasks: 4},
	})
	for i, want := range []string{"up, draining, 2 tasks left (kernel upgrade)", "up, draining", "up"} {
		if got := tab.rows[i][1]; got != want {
			t.Errorf("row %d: state %q, want %q", i, got, want)
		}
	}
}
