package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/projections"
)

// maxFollowChunk bounds one server-sent event of a followed log.
const maxFollowChunk = 16 << 10

// taskLogStream follows a task's stdout or stderr as server-sent events:
// each event's data is a JSON string of what the task wrote. The task page
// (static/logs.js) appends them under the tail it was served with.
func (h *Handler) taskLogStream(w http.ResponseWriter, r *http.Request) {
	user, name, stream := r.PathValue("user"), r.PathValue("job"), r.PathValue("stream")
	idx, err := strconv.ParseInt(r.PathValue("index"), 10, 32)
	switch {
	case err != nil || idx < 0:
		http.Error(w, fmt.Sprintf("index: %q is not a task index", r.PathValue("index")), http.StatusBadRequest)
		return
	case stream != "stdout" && stream != "stderr":
		http.Error(w, fmt.Sprintf("stream: %q is not stdout or stderr", stream), http.StatusBadRequest)
		return
	case h.cfg.Logs == nil:
		http.Error(w, "this master reads no logs from agents", http.StatusNotFound)
		return
	}
	key := projections.TaskKey{User: user, Job: name, Index: int32(idx)}
	// Refused before the event stream starts, so that the browser gets
	// the status, not a stream that fails.
	if err := h.cfg.Logs.MayReadLogs(h.ctx(r), key); err != nil {
		http.Error(w, status.Convert(err).Message(), httpStatus(err))
		return
	}
	var machine string
	h.cfg.Cell.View(func(st *projections.State) {
		if t := st.Task(user, name, int32(idx)); t != nil {
			machine = t.Machine
		}
	})
	if machine == "" {
		http.Error(w, fmt.Sprintf("task %s does not run on a machine", key), http.StatusNotFound)
		return
	}
	rc := startEventStream(w)
	ctx, cancel := context.WithCancel(h.ctx(r))
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-h.closed:
			cancel()
		}
	}()
	s := &sseStream{ctx: ctx, w: w, rc: rc}
	if s.write("retry: 5000\n\n") != nil {
		return
	}
	err = h.cfg.Logs.FollowLogs(ctx, key, stream, func(b []byte) error {
		for len(b) > 0 {
			n := min(len(b), maxFollowChunk)
			js, _ := json.Marshal(string(b[:n]))
			if err := s.write("data: " + string(js) + "\n\n"); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		js, _ := json.Marshal(status.Convert(err).Message())
		_ = s.write("event: failure\ndata: " + string(js) + "\n\n")
	}
}
