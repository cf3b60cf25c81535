package pgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries is returned when no PostgreSQL server binaries are
// installed: the environment lacks a part, not the code a bug.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb and postgres) found")

// Install is what to run on Debian or Ubuntu for the server binaries.
const Install = "apt-get install postgresql"

// binDirGlobs are where distributions keep the server binaries outside
// PATH: Debian and Ubuntu (one directory per major version), the PGDG
// packages of Red Hat's family, and a build from source.
var binDirGlobs = []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin"}

// EnvBinaries names the variable that chooses the directory of the server
// binaries, for a version other than the newest installed or a build of
// one's own.
const EnvBinaries = "CORRAL_TEST_POSTGRES_BIN"

// FindBinaries returns the directory holding initdb and postgres:
// CORRAL_TEST_POSTGRES_BIN when set, else the first directory of PATH that
// has both, else the newest major version under binDirGlobs. Debian keeps
// them off PATH, so the globs are the usual case.
func FindBinaries() (string, error) {
	if dir := os.Getenv(EnvBinaries); dir != "" {
		if !hasServer(dir) {
			return "", fmt.Errorf("%w in %s=%s: install them (`%s`) or point it at a directory with both", ErrNoBinaries, EnvBinaries, dir, Install)
		}
		return dir, nil
	}
	return findBinaries(filepath.SplitList(os.Getenv("PATH")), binDirGlobs)
}

func findBinaries(path, globs []string) (string, error) {
	for _, dir := range path {
		if dir != "" && hasServer(dir) {
			return dir, nil
		}
	}
	var found []string
	for _, g := range globs {
		dirs, _ := filepath.Glob(g)
		for _, d := range dirs {
			if hasServer(d) {
				found = append(found, d)
			}
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("%w in PATH or %s: install them (`%s`) or set CORRAL_TEST_DATABASE_URL to a server the tests may create databases on",
			ErrNoBinaries, strings.Join(globs, ", "), Install)
	}
	sort.SliceStable(found, func(i, j int) bool { return majorVersion(found[i]) > majorVersion(found[j]) })
	return found[0], nil
}

func hasServer(dir string) bool {
	for _, tool := range []string{"initdb", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, tool)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// majorVersion reads the version out of a path like
// /usr/lib/postgresql/15/bin or /usr/pgsql-16/bin: its last numeric
// element, since the directories above may have numbers of their own; 0
// when there is none.
func majorVersion(dir string) int {
	parts := strings.Split(dir, string(filepath.Separator))
	for i := len(parts) - 1; i >= 0; i-- {
		if n, err := strconv.Atoi(strings.TrimPrefix(parts[i], "pgsql-")); err == nil {
			return n
		}
	}
	return 0
}
