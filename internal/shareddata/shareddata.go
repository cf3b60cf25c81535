package shareddata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Env names the folder holding the shared data when it is not an ancestor's
// shared/.
const Env = "CORRAL_SHARED"

// The folders below the shared data that corral reads.
const (
	Workloads   = "workloads"
	GoogleTrace = "traces/google-clusterdata-2011-2"
	FocusSpec   = "focus-spec"
)

// ErrNotFound is returned by Find when the folder is in no candidate.
var ErrNotFound = errors.New("shared data not found")

// Find returns the folder rel (slash-separated) below the shared data:
// $CORRAL_SHARED/rel when the variable is set, else shared/rel in the first
// of start's ancestors (start included) that has it.
func Find(start, rel string) (string, error) {
	rel = filepath.FromSlash(rel)
	if root := os.Getenv(Env); root != "" {
		dir := filepath.Join(root, rel)
		if isDir(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%s is not a folder (%s=%s): %w", dir, Env, root, ErrNotFound)
	}
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		if cand := filepath.Join(dir, "shared", rel); isDir(cand) {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("shared/%s in no ancestor of %s (set %s): %w", filepath.ToSlash(rel), start, Env, ErrNotFound)
		}
		dir = parent
	}
}

// Dir returns the folder rel below the shared data for a test or benchmark:
// it fails under CI=true or in a benchmark when the folder is missing, and
// skips the test elsewhere, saying what to set.
func Dir(tb testing.TB, rel string) string {
	tb.Helper()
	dir, err := Find(".", rel)
	if err == nil {
		return dir
	}
	if _, bench := tb.(*testing.B); bench || os.Getenv("CI") == "true" {
		tb.Fatalf("the shared data (CI has it beside the clone): %v", err)
	}
	tb.Skipf("the shared data: %v", err)
	return ""
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
