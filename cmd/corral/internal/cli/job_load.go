package cli

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/cmd/corral/internal/jobfile"
)

// loadFile reads a job file as the caller named here (job render, which
// asks no master).
func (a *app) loadFile(path string) (*jobfile.File, error) {
	user := a.caller()
	if user == "" {
		user = "nobody"
	}
	return a.loadFileAs(path, user)
}

// loadFileAs reads a job file as user: std.extVar('user') and the owner
// the spec may name. Verbs that send it to a master pass whom the master
// takes the caller to be (client.me).
func (a *app) loadFileAs(path, user string) (*jobfile.File, error) {
	return jobfile.Load(path, jobfile.Options{User: user, ExtVars: map[string]string{"cell": a.cellName()}, JPaths: a.jpaths})
}

// loadFileFor reads a job file as whom cl's master takes the caller to be.
func (a *app) loadFileFor(ctx context.Context, cl *client, path string) (*jobfile.File, error) {
	user, err := cl.me(ctx)
	if err != nil {
		return nil, err
	}
	return a.loadFileAs(path, user)
}

// addSecrets gives the jobs of f the values of the secret variables named
// (--secret NAME), read from the caller's environment: each must be in a
// job's secret_env. The master seals them before anything is recorded.
func (a *app) addSecrets(f *jobfile.File, names []string) error {
	for _, name := range names {
		val, ok := a.lookupEnv(name)
		if !ok {
			return usageErr("--secret %s: $%s is not set in your environment", name, name)
		}
		used := false
		for _, spec := range f.Jobs {
			if !slices.Contains(spec.SecretEnv, name) {
				continue
			}
			if spec.Env == nil {
				spec.Env = map[string]string{}
			}
			spec.Env[name] = val
			used = true
		}
		if !used {
			return usageErr("--secret %s: no job of the file lists %s in secret_env", name, name)
		}
	}
	return nil
}

// lookupEnv is os.LookupEnv, or the test's Getenv (set when not empty).
func (a *app) lookupEnv(k string) (string, bool) {
	if a.env.Getenv == nil {
		return os.LookupEnv(k)
	}
	v := a.env.Getenv(k)
	return v, v != ""
}

// commandLine prints a command and its arguments on one line, quoting the
// arguments a shell would need quoted.
func commandLine(cmd string, argv []string) string {
	parts := []string{cmd}
	for _, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]#~") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
