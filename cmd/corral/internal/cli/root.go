package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/api"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// DefaultMaster is where a cell started by `corral up` listens.
const DefaultMaster = "127.0.0.1:7070"

// Infra is an open Infrastore file, as the corral command uses it.
type Infra interface {
	api.Analytics
	Run(ctx context.Context, store events.Tailer) error
	Rebuild(ctx context.Context, store events.Reader) (int64, error)
	ImportGoogleTrace(ctx context.Context, dir string) (string, error)
	Position(ctx context.Context) (int64, error)
	// Log reads the log back from the file's events table.
	Log() projections.Source
	Close() error
}

// InfraOptions are given to OpenInfra.
type InfraOptions struct {
	ReadOnly bool
	Cell     string // the cell's name, in FOCUS exports
	// The limits of queries; zero values are the Infrastore's defaults.
	MemoryLimit    string // DuckDB's memory_limit, e.g. "1536MiB"
	Threads        int
	MaxRows        int
	MaxResultBytes int64
	QueryTimeout   time.Duration
	// MemoryBudget is the memory the process may hold: queries are
	// interrupted as it nears it (infrastore.Options.MemoryBudget).
	MemoryBudget int64
}

// OpenInfra opens the Infrastore file at path.
type OpenInfra func(ctx context.Context, path string, opts InfraOptions) (Infra, error)

// Env is what the command reads from and writes to.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// OpenInfra opens Infrastore files; nil makes the verbs that need one
	// fail with a clear message.
	OpenInfra OpenInfra
}

// exitError carries an exit code other than ExitFailed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks a usage mistake: exit code 2.
func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// silentErr ends the command with a code, its message already printed.
type silentErr struct{ code int }

func (e *silentErr) Error() string { return fmt.Sprintf("exit %d", e.code) }

// app holds the global flags and what every verb shares.
type app struct {
	env     Env
	master  string
	output  string
	user    string
	timeout time.Duration
	verbose bool
	ops     opsFlags // --log-format, --debug-addr (ops.go)
	auth    clientAuth
	jpaths  []string // --jpath: folders Jsonnet job files may import from
	// noCredentials, when set, is the cell directory searched in vain:
	// the client speaks plaintext, and says so if that fails.
	noCredentials string
}

func (a *app) getenv(k string) string {
	if a.env.Getenv == nil {
		return os.Getenv(k)
	}
	return a.env.Getenv(k)
}

// caller is the user the command acts as.
func (a *app) caller() string {
	if a.user != "" {
		return a.user
	}
	if u := a.getenv("CORRAL_USER"); u != "" {
		return u
	}
	if u := a.getenv("USER"); u != "" {
		return u
	}
	// Shells started without a login (containers, CI) may not set $USER:
	// the account the process runs as is the caller then.
	if u, err := user.Current(); err == nil && a.env.Getenv == nil {
		return u.Username
	}
	return ""
}

func (a *app) stdout() io.Writer { return a.env.Stdout }
func (a *app) stderr() io.Writer { return a.env.Stderr }

// note prints progress or a hint for people to stderr.
func (a *app) note(format string, args ...any) {
	fmt.Fprintf(a.env.Stderr, format+"\n", args...)
}

// Main runs the corral command with args (without the program name) and
// returns its exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Stdout == nil {
		env.Stdout = os.Stdout
	}
	if env.Stderr == nil {
		env.Stderr = os.Stderr
	}
	a := &app{env: env}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var se *silentErr
	if errors.As(err, &se) {
		return se.code
	}
	code := ExitFailed
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case isCobraUsage(err):
		code = ExitUsage
	}
	fmt.Fprintln(env.Stderr, "corral: "+a.describe(err))
	if code == ExitUsage {
		fmt.Fprintln(env.Stderr, "Run `corral help` or add --help to a command for its usage.")
	}
	return code
}

// isCobraUsage recognises the usage errors cobra makes itself.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "invalid argument", "flag needs an argument", "accepts ", "requires at least"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// describe renders an error with what to do next.
func (a *app) describe(err error) string {
	var se interface {
		error
		GRPCStatus() *status.Status
	}
	if !errors.As(err, &se) {
		return err.Error()
	}
	st := se.GRPCStatus()
	msg := st.Message()
	prefix := strings.TrimSuffix(strings.TrimSuffix(err.Error(), se.Error()), ": ")
	if prefix != "" {
		prefix += ": "
	}
	switch st.Code() {
	case codes.Unavailable:
		if a.noCredentials != "" && !strings.Contains(msg, "connection refused") && !strings.Contains(msg, "no such host") {
			// Something answers, but not in plaintext: a TLS master.
			return fmt.Sprintf("%sno CA or credentials were found (no --ca, --cert/--key or --token, no CORRAL_CA, CORRAL_CERT/CORRAL_KEY or CORRAL_TOKEN, and no cell under %s), so corral spoke plaintext to %s, which did not answer it (%s). "+
				"For a local `corral up` cell, export CORRAL_DATA=<its --data directory>; otherwise give --ca with --cert and --key, or with --token.", prefix, a.noCredentials, a.masterAddr(), msg)
		}
		if strings.Contains(msg, "connection refused") || strings.Contains(msg, "dial") || strings.Contains(msg, "no such host") || strings.Contains(msg, "connection error") {
			return fmt.Sprintf("%scannot reach the master at %s (%s). Start a cell with `corral up`, or point --master (or CORRAL_MASTER) at a running master.", prefix, a.masterAddr(), msg)
		}
		return prefix + msg + " (retry in a moment; `corral status` shows which master leads)"
	case codes.DeadlineExceeded:
		return prefix + msg + " (the master did not answer in time: check `corral status`, or raise --rpc-timeout)"
	case codes.Unauthenticated:
		return prefix + msg + " (give your credentials: --cert and --key, or --token, with --ca; or CORRAL_CERT, CORRAL_KEY, CORRAL_TOKEN, CORRAL_CA; a local `corral up` cell's are found under its --data, CORRAL_DATA)"
	case codes.Unimplemented:
		if strings.Contains(msg, "Infrastore") {
			return prefix + msg + " (start the master with --infrastore PATH, or read a file with --db PATH)"
		}
		return prefix + msg
	}
	return prefix + msg
}

func (a *app) masterAddr() string {
	if a.master != "" {
		return a.master
	}
	if m := a.getenv("CORRAL_MASTER"); m != "" {
		return m
	}
	return DefaultMaster
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "corral",
		Short: "corral runs jobs on a cell of machines, after Google's Borg",
		Long: `corral runs jobs on a cell of machines, after Google's Borg.

Start a whole cell on this machine with ` + "`corral up`" + `, then, in another terminal:
  corral job submit examples/hello.jsonnet --wait
  corral task list hello
  corral why unschedulable
  corral events --job hello
  corral sql "SELECT type, count(*) FROM task_events GROUP BY type"

Environment:
  CORRAL_MASTER  the master's address (--master)
  CORRAL_DATA    the data directory of a local ` + "`corral up`" + ` cell (default ` + DefaultData + `): its
                 certs/ hold the CA and your credentials, found there by every verb
  CORRAL_CA, CORRAL_CERT, CORRAL_KEY, CORRAL_TOKEN
                 the cell's CA and your certificate and key, or token (--ca, --cert, --key, --token)
  CORRAL_USER    the user you act as (--user; default $USER), where credentials do not
                 say it: a master without them, a local cell's (corral whoami)
  CORRAL_CELL    the cell's name`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.master, "master", "", "the master's gRPC address, or several separated by commas (default $CORRAL_MASTER or "+DefaultMaster+")")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table, json, yaml or csv")
	_ = root.RegisterFlagCompletionFunc("output", completeOutput)
	pf.StringVar(&a.user, "user", "", "act as this user where credentials do not name one (default $CORRAL_USER or $USER; corral whoami)")
	pf.DurationVar(&a.timeout, "rpc-timeout", 30*time.Second, "time limit of each request to the master")
	pf.BoolVarP(&a.verbose, "verbose", "v", false, "log more (servers) and say which master answered (clients)")
	a.ops.add(pf)
	a.auth.add(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: ExitUsage, err: err} })
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if !slices.Contains(outputFormats, a.output) {
			return usageErr("--output %q: want %s", a.output, strings.Join(outputFormats, ", "))
		}
		return nil
	}
	root.AddGroup(&cobra.Group{ID: "jobs", Title: "Jobs and tasks:"}, &cobra.Group{ID: "cell", Title: "The cell:"},
		&cobra.Group{ID: "history", Title: "History and analytics:"}, &cobra.Group{ID: "run", Title: "Running a cell:"})
	defer groupsNeedAVerb(root)
	for _, c := range []*cobra.Command{a.jobCommand(), a.taskCommand(), a.whyCommand()} {
		c.GroupID = "jobs"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.machineCommand(), a.quotaCommand(), a.allocCommand(), a.statusCommand(), a.whoamiCommand(), a.doctorCommand()} {
		c.GroupID = "cell"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.eventsCommand(), a.stateCommand(), a.sqlCommand(), a.billCommand(), a.priceCommand(), a.infrastoreCommand(), a.simCommand()} {
		c.GroupID = "history"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.upCommand(), a.masterCommand(), a.agentCommand(), a.migrateCommand(), a.certsCommand(), a.tokenCommand(), a.versionCommand()} {
		c.GroupID = "run"
		root.AddCommand(c)
	}
	return root
}

// args checks the number of positional arguments, naming them on error.
func args(min, max int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) < min || (max >= 0 && len(a) > max) {
			return usageErr("%s takes %s; got %d argument(s)\nusage: %s", cmd.CommandPath(), names, len(a), cmd.UseLine())
		}
		return nil
	}
}

// groupsNeedAVerb makes every command that only groups others (corral job,
// corral task, ...) a usage error without a known verb, rather than a
// silent success.
func groupsNeedAVerb(c *cobra.Command) {
	for _, sub := range c.Commands() {
		groupsNeedAVerb(sub)
	}
	if c.HasParent() && c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, argv []string) error {
			if len(argv) > 0 {
				return usageErr("unknown command %q for %q; its commands are listed by `%s --help`", argv[0], cmd.CommandPath(), cmd.CommandPath())
			}
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return &silentErr{code: ExitUsage}
		}
	}
}
