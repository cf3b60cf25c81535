package testkit

import (
	"os"
	"testing"
)

func TestProcStatus(t *testing.T) {
	self := ProcStatusKB(t, 0, "VmRSS:")
	byPid := ProcStatusKB(t, os.Getpid(), "VmHWM:")
	if self <= 0 || byPid < self/2 {
		t.Errorf("VmRSS %d kB, VmHWM by pid %d kB: want both positive, the peak at least the resident set", self, byPid)
	}
	if _, err := ProcStatus(0, "NoSuchField:"); err == nil {
		t.Error("a field /proc/self/status lacks read without an error")
	}
}
