package cli

import (
	"bytes"
	"testing"
)

func TestFormatting(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 512: "512B", 1 << 20: "1MiB", 1536 << 20: "1.5GiB", 32 << 20: "32MiB"} {
		if got := bytesHuman(in); got != want {
			t.Errorf("bytesHuman(%d) = %q, want %q", in, got, want)
		}
	}
	if got := indexRanges([]int32{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("indexRanges = %q", got)
	}
	if got := trimZeros("1.250000000"); got != "1.25" {
		t.Errorf("trimZeros = %q", got)
	}
	var b bytes.Buffer
	tab := &table{cols: []string{"A", "LONGER"}}
	tab.add("x,y", "1")
	if err := writeTable(&b, tab, "csv"); err != nil || b.String() != "a,longer\n\"x,y\",1\n" {
		t.Errorf("csv: %q %v", b.String(), err)
	}
	if got := redactURL("postgres://corral:secret@db:5432/corral"); got != "postgres://corral:***@db:5432/corral" {
		t.Errorf("redactURL = %q", got)
	}
}
