//go:build race

package auth_test

// raceEnabled: the race detector slows this process some tenfold, so the
// load test models a slower log to keep the log, not the detector, the
// bottleneck.
const raceEnabled = true
