package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// kthLargest is the k-th element of the values sorted from the largest,
// for every k, with duplicates, sorted, reversed and constant inputs.
func TestKthLargestIsTheSortedOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		n := 1 + rng.IntN(60)
		values := make([]int64, n)
		for i := range values {
			values[i] = int64(rng.IntN(1 + round%20)) // few distinct values in many rounds
		}
		switch round % 4 {
		case 1:
			slices.Sort(values)
		case 2:
			slices.Sort(values)
			slices.Reverse(values)
		}
		sorted := slices.Clone(values)
		slices.SortFunc(sorted, func(a, b int64) int { return int(b - a) })
		for k := 1; k <= n; k++ {
			if got := kthLargest(slices.Clone(values), k); got != sorted[k-1] {
				t.Fatalf("round %d: k=%d of %v: %d, want %d", round, k, values, got, sorted[k-1])
			}
		}
	}
}
