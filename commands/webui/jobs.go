package webui

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
)

var jobStates = []string{"pending", "running", "dead"}

type jobsData struct {
	User, Selector, State string
	SelectorErr, StateErr string
	States                []string
	Rows                  []jobRow
	Pager                 pager
	Jobs                  int
	Pending, Live, Dead   int32
}

func (h *Handler) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := jobsData{User: strings.TrimSpace(q.Get("user")), Selector: strings.TrimSpace(q.Get("selector")),
		State: strings.TrimSpace(q.Get("state")), States: jobStates}
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if d.State != "" && !contains(jobStates, d.State) {
		d.StateErr = fmt.Sprintf("state: %q is not one of pending, running, dead", d.State)
		w.WriteHeader(http.StatusBadRequest)
		h.render(w, r, "jobs", page{Title: "Jobs", Nav: "jobs", Data: d})
		return
	}
	// One read for the whole filtered list gives the totals; the page is a
	// slice of it.
	list, err := h.cfg.API.List(h.ctx(r), &apipb.ListRequest{User: d.User, Selector: d.Selector, State: d.State, Limit: 1 << 30})
	if err != nil {
		if status.Code(err) == codes.InvalidArgument {
			// The selector is the only argument List can refuse.
			d.SelectorErr = status.Convert(err).Message()
			w.WriteHeader(http.StatusBadRequest)
			h.render(w, r, "jobs", page{Title: "Jobs", Nav: "jobs", Data: d})
			return
		}
		h.failAPI(w, r, err)
		return
	}
	d.Jobs = len(list.Jobs)
	for _, j := range list.Jobs {
		d.Pending += j.Pending
		d.Live += j.Running + j.Scheduled
		d.Dead += j.Dead
	}
	if offset > len(list.Jobs) {
		h.fail(w, r, http.StatusBadRequest, errors.New("offset: past the last job"))
		return
	}
	d.Rows = h.jobRows(list.Jobs[offset:min(offset+h.cfg.PageSize, len(list.Jobs))])
	d.Pager = newPager(r, "offset", offset, h.cfg.PageSize, len(list.Jobs))
	h.render(w, r, "jobs", page{Title: "Jobs", Nav: "jobs", Data: d})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
