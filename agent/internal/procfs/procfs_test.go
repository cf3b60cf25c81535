package procfs

import (
	"os"
	"testing"
)

func TestParseStatWithAwkwardCommandName(t *testing.T) {
	line := "4242 (we ird) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 123456 1000000 512 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	s, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{Pid: 4242, State: 'S', PPid: 1, Pgrp: 4242, UTime: 7, STime: 3, CUTime: 2, CSTime: 1, StartTicks: 123456, RSSBytes: 512 * PageSize}
	if s != want {
		t.Errorf("ParseStat = %+v, want %+v", s, want)
	}
	if s.CPUTicks() != 13 || !s.Alive() {
		t.Errorf("CPUTicks %d, Alive %v", s.CPUTicks(), s.Alive())
	}
	for _, bad := range []string{"", "12 (x", "x (y) S 1", "1 (y) S 1 2 3"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) succeeded", bad)
		}
	}
}

func TestReadsThisMachine(t *testing.T) {
	s, err := ReadStat(os.Getpid())
	if err != nil || s.Pid != os.Getpid() || s.StartTicks == 0 || s.RSSBytes == 0 {
		t.Errorf("ReadStat(self) = %+v, %v", s, err)
	}
	if _, err := ReadStat(1 << 30); err != ErrNoProcess {
		t.Errorf("ReadStat of no process: %v", err)
	}
	m, err := ReadMeminfo()
	if err != nil || m.Total <= 0 || m.Available <= 0 || m.Available > m.Total {
		t.Errorf("ReadMeminfo = %+v, %v", m, err)
	}
	if BootID() == "" {
		t.Errorf("no boot id")
	}
	pids, err := Pids()
	if err != nil || len(pids) < 2 {
		t.Errorf("Pids = %v, %v", pids, err)
	}
}
