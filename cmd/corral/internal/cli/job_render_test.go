package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	code, out, stderr := run(t, "job", "render", "../../../../examples/hello.jsonnet")
	if code != 0 || !strings.Contains(out, `"name": "hello"`) || !strings.Contains(out, `"priority": "batch"`) || !strings.Contains(out, `"memory": "32MiB"`) {
		t.Fatalf("render: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = run(t, "-o", "yaml", "job", "render", "../../../../examples/alloc.jsonnet")
	if code != 0 || !strings.Contains(out, "alloc_sets:") || !strings.Contains(out, "alloc_set: webset") {
		t.Fatalf("render yaml: exit %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\ncount: 0\ncommand: /bin/true\nresources: {cpu: 1, memory: 1Mi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "job", "render", bad)
	if code != ExitFailed || !strings.Contains(stderr, bad+":2: count: must be > 0") {
		t.Fatalf("bad file: exit %d, %q", code, stderr)
	}
}
