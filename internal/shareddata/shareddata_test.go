package shareddata

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	root := t.TempDir()
	clone := filepath.Join(root, "clone", "scheduler", "workload")
	trace := filepath.Join(root, "shared", "traces", "google-clusterdata-2011-2")
	for _, d := range []string{clone, trace} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("an ancestor's shared folder", func(t *testing.T) {
		t.Setenv(Env, "")
		got, err := Find(clone, GoogleTrace)
		if err != nil || got != trace {
			t.Errorf("Find = %q, %v; want %q", got, err, trace)
		}
	})
	t.Run("missing in every ancestor", func(t *testing.T) {
		t.Setenv(Env, "")
		if got, err := Find(clone, Workloads); !errors.Is(err, ErrNotFound) {
			t.Errorf("Find(workloads) = %q, %v; want ErrNotFound", got, err)
		}
	})
	t.Run("the variable wins", func(t *testing.T) {
		t.Setenv(Env, filepath.Join(root, "shared"))
		got, err := Find("/", GoogleTrace)
		if err != nil || got != trace {
			t.Errorf("Find with %s = %q, %v; want %q", Env, got, err, trace)
		}
	})
	t.Run("the variable names a folder without it", func(t *testing.T) {
		t.Setenv(Env, root)
		if _, err := Find(clone, GoogleTrace); !errors.Is(err, ErrNotFound) {
			t.Errorf("Find with %s=%s: %v; want ErrNotFound", Env, root, err)
		}
	})
}
