package cli

import (
	"runtime"
	"strings"
	"testing"
)

// corral version names the module and the Go release it was built with, as
// the build recorded them.
func TestVersion(t *testing.T) {
	code, out, stderr := run(t, "version")
	if code != ExitOK || !strings.HasPrefix(out, "corral ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = run(t, "version", "-o", "json")
	if code != ExitOK || !strings.Contains(out, `"go_version": "`+runtime.Version()+`"`) || !strings.Contains(out, `"module": "github.com/corralhq/corral`) {
		t.Fatalf("version -o json: exit %d\n%s", code, out)
	}
}
