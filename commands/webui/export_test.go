package webui

// RoutePatterns are the patterns New registers (routes), for the walk of
// every route as every kind of viewer.
func (h *Handler) RoutePatterns() []string {
	var out []string
	for _, rt := range h.routes() {
		out = append(out, rt.pattern)
	}
	return out
}
