package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
)

// RunMarker starts the line the agent writes to a task's stdout and stderr
// before each run: runs are told apart in the logs, and the previous run's
// output is what lies between the last two markers.
const RunMarker = "--- corral: run "

// Log serving bounds: a chunk per message, and how much of a file one
// request reads before following (a task's logs rotate at LogMaxBytes).
const (
	logChunk      = 32 << 10
	logFollowPoll = 250 * time.Millisecond
	// maxLogReads is how many requests at once may hold a log's window
	// (up to LogMaxBytes) in memory; more wait their turn, so that many
	// readers cannot exhaust the agent's memory. Following costs a chunk.
	maxLogReads = 4
)

// DefaultMaxLogStreams is the log streams an agent serves at once unless
// told otherwise (Config.MaxLogStreams): half a cell's default cap
// (auth.DefaultMaxStreams), since a cell's streams spread over its
// machines, and each following stream costs the agent an open file, a
// goroutine and a 32 KiB buffer, so 256 bound it to about 8 MiB.
const DefaultMaxLogStreams = 256

// markRun appends the run marker to both log files of t's sandbox.
func markRun(sandbox string, run int32, at time.Time) {
	line := fmt.Sprintf("%s%d started %s ---\n", RunMarker, run, at.UTC().Format(time.RFC3339))
	for _, name := range []string{"stdout", "stderr"} {
		if f, err := openLog(filepath.Join(sandbox, "logs", name)); err == nil {
			_, _ = f.WriteString(line)
			f.Close()
		}
	}
}

// Logs streams a task's log file from its sandbox (see agentpb).
func (a *Agent) Logs(req *agentpb.LogsRequest, stream agentpb.Agent_LogsServer) error {
	ref := req.GetTask()
	if err := validRef(ref); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	// Refused at once when full: a stream is held as long as its reader
	// wants, so a queue for a slot could wait forever.
	select {
	case a.logStreams <- struct{}{}:
		defer func() { <-a.logStreams }()
	default:
		return status.Errorf(codes.ResourceExhausted, "machine %s serves its cap of %d log streams at once (corral agent --max-log-streams): retry later",
			a.cfg.Name, cap(a.logStreams))
	}
	name := "stdout"
	if req.Stderr {
		name = "stderr"
	}
	path := filepath.Join(a.sandboxOf(ref), "logs", name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return status.Errorf(codes.NotFound, "task %s has no %s on machine %s (never ran here, or its sandbox was removed)", TaskKey(ref), name, a.cfg.Name)
	}
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	defer f.Close()
	send := func(b []byte) error {
		for len(b) > 0 {
			n := min(len(b), logChunk)
			if err := stream.Send(&agentpb.LogChunk{Data: b[:n]}); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	}
	var size int64
	if req.OnlyNew && req.Follow {
		fi, err := f.Stat()
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		size = fi.Size()
	} else {
		select {
		case a.logReads <- struct{}{}:
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
		size, err = a.sendWindow(f, req, send)
		<-a.logReads
		if err != nil {
			return err
		}
	}
	if !req.Follow || req.Previous || req.Run > 0 {
		return nil
	}
	return followLog(stream.Context(), f, size, send)
}

// sendWindow sends the part of f's last LogMaxBytes that req asks for, and
// returns the size of f it read up to.
func (a *Agent) sendWindow(f *os.File, req *agentpb.LogsRequest, send func([]byte) error) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, status.Error(codes.Internal, err.Error())
	}
	size := fi.Size()
	start := max(0, size-a.cfg.LogMaxBytes)
	window := make([]byte, size-start)
	if _, err := f.ReadAt(window, start); err != nil && !errors.Is(err, io.EOF) {
		return 0, status.Error(codes.Internal, err.Error())
	}
	part := SelectRun(window, req.Previous)
	if req.Run > 0 {
		var ok bool
		if part, ok = SelectPlacementRun(window, int(req.PlacementsBack), req.Run); !ok {
			return size, status.Errorf(codes.NotFound, "machine %s no longer keeps run %d of task %s's placement %d before its last here: its log keeps the last %d bytes, and they hold it no more (rotated)",
				a.cfg.Name, req.Run, TaskKey(req.Task), req.PlacementsBack, a.cfg.LogMaxBytes)
		}
	}
	return size, send(TailOf(part, int(req.TailLines), req.TailBytes))
}

// followLog sends what is appended to f from off on until ctx ends. A file
// that shrank was rotated (copied and truncated): reading starts over.
func followLog(ctx context.Context, f *os.File, off int64, send func([]byte) error) error {
	buf := make([]byte, logChunk)
	for {
		fi, err := f.Stat()
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		if fi.Size() < off {
			off = 0
		}
		for off < fi.Size() {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				if err := send(buf[:n]); err != nil {
					return err
				}
				off += int64(n)
			}
			if err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(logFollowPoll):
		}
	}
}

// SelectRun is the current run's part of a log (from its last run marker
// on), or with previous the run before it (between the last two markers);
// a log without markers is one run.
func SelectRun(log []byte, previous bool) []byte {
	marker := []byte(RunMarker)
	last := lastMarker(log, len(log), marker)
	if !previous {
		if last < 0 {
			return log
		}
		return log[last:]
	}
	if last < 0 {
		return nil
	}
	before := lastMarker(log, last, marker)
	return log[max(before, 0):last]
}

// SelectPlacementRun is the part of a log written by run run of the
// placement placementsBack before the last: the agent numbers a
// placement's runs from 1 (markRun), so each run-1 marker starts a
// placement. False when the log does not hold that run's marker.
func SelectPlacementRun(log []byte, placementsBack int, run int32) ([]byte, bool) {
	type mark struct {
		at  int
		run int32
	}
	var marks []mark
	for at := 0; at < len(log); {
		if bytes.HasPrefix(log[at:], []byte(RunMarker)) {
			rest := log[at+len(RunMarker):]
			end := bytes.IndexByte(rest, ' ')
			if n, err := strconv.ParseInt(string(rest[:max(end, 0)]), 10, 32); end > 0 && err == nil {
				marks = append(marks, mark{at, int32(n)})
			}
		}
		nl := bytes.IndexByte(log[at:], '\n')
		if nl < 0 {
			break
		}
		at += nl + 1
	}
	// Placements from the last back: each begins at a run-1 marker (the
	// first, cut by rotation, may not).
	placement := 0
	for i := len(marks) - 1; i >= 0; i-- {
		if placement == placementsBack && marks[i].run == run {
			end := len(log)
			if i+1 < len(marks) {
				end = marks[i+1].at
			}
			return log[marks[i].at:end], true
		}
		if marks[i].run == 1 {
			placement++
		}
		if placement > placementsBack {
			break
		}
	}
	return nil, false
}

// lastMarker is the start of the last marker line beginning before end, or -1.
func lastMarker(log []byte, end int, marker []byte) int {
	for end > 0 {
		i := bytes.LastIndex(log[:end], marker)
		if i < 0 {
			return -1
		}
		if i == 0 || log[i-1] == '\n' {
			return i
		}
		end = i
	}
	return -1
}

// TailOf is the end of b: its last lines lines (0: all), then at most
// maxBytes (0: no bound).
func TailOf(b []byte, lines int, maxBytes int64) []byte {
	if lines > 0 {
		trimmed := bytes.TrimSuffix(b, []byte("\n"))
		i := len(trimmed)
		for n := 0; n < lines && i >= 0; n++ {
			i = bytes.LastIndexByte(trimmed[:i], '\n')
		}
		if i >= 0 {
			b = b[i+1:]
		}
	}
	if maxBytes > 0 && int64(len(b)) > maxBytes {
		b = b[int64(len(b))-maxBytes:]
	}
	return b
}

// validRef refuses task references that cannot name a sandbox: a path
// must not leave the agent's tasks directory.
func validRef(ref *events.TaskRef) error {
	if ref == nil {
		return errors.New("task: missing")
	}
	for field, v := range map[string]string{"task.user": ref.User, "task.job": ref.Job} {
		if v == "" || v == "." || v == ".." || strings.ContainsAny(v, "/\\\x00") {
			return fmt.Errorf("%s: %q is not a name", field, v)
		}
	}
	if ref.Index < 0 {
		return fmt.Errorf("task.index: %d is negative", ref.Index)
	}
	return nil
}
