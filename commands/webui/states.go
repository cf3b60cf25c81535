package webui

import (
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/projections"
)

// The API says "dead" of every task and job that ended. A task that ran to
// its end with exit 0, and a job whose tasks all did, are shown as
// finished, in a colour of their own: finishing is what a batch job is
// for, not a failure like a kill, an eviction or a loss.

// shownTaskState is the state a task is shown in.
func shownTaskState(state, how string, exitCode int32) string {
	if state == "dead" && how == "finished" && exitCode == 0 {
		return "finished"
	}
	return state
}

// jobRow is a job as the pages show it: its state, finished told apart.
type jobRow struct {
	*apipb.JobView
	Shown string
}

// jobRows reads, in one view of the cell, how each dead job of views
// ended.
func (h *Handler) jobRows(views []*apipb.JobView) []jobRow {
	rows := make([]jobRow, len(views))
	dead := false
	for i, v := range views {
		rows[i] = jobRow{JobView: v, Shown: v.State}
		dead = dead || v.State == "dead"
	}
	if !dead {
		return rows
	}
	h.cfg.Cell.View(func(st *projections.State) {
		for i := range rows {
			v := rows[i].JobView
			if v.State != "dead" || v.Spec == nil {
				continue
			}
			if j := st.Job(v.Spec.User, v.Spec.Name); j != nil && j.End == projections.JobFinishedEnd && j.SubmittedUS == v.SubmittedUs {
				rows[i].Shown = "finished"
			}
		}
	})
	return rows
}
