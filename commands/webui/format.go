package webui

import (
	"fmt"
	"html/template"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

var funcs = template.FuncMap{
	"bytes":          humanBytes,
	"cores":          cores,
	"milli":          milli,
	"pct":            pct,
	"num":            num,
	"us":             formatUS,
	"jobURL":         jobURL,
	"taskURL":        taskURL,
	"machineURL":     machineURL,
	"eventsURL":      eventsURL,
	"res":            resources,
	"sortedKeys":     sortedKeys,
	"join":           strings.Join,
	"add":            func(a, b int32) int32 { return a + b },
	"stateClass":     stateClass,
	"shownTaskState": shownTaskState,
}

// humanBytes prints n in binary units with up to one decimal: "1.5 GiB".
func humanBytes(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	f := math.Abs(float64(n))
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if neg {
		s = "-" + s
	}
	return s + " " + units[i]
}

// cores prints a number of cores: "0.25", "2".
func cores(c float64) string {
	if c == 0 {
		return "0"
	}
	s := strconv.FormatFloat(c, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "0" || s == "-0" {
		return "<0.001"
	}
	return s
}

// milli prints thousandths of a core as cores.
func milli(m int64) string { return cores(float64(m) / 1000) }

func pct(part, whole float64) string {
	if whole <= 0 {
		return "–"
	}
	return strconv.FormatFloat(100*part/whole, 'f', 0, 64) + "%"
}

// num prints an integer with thousands separators: 10,000.
func num(v any) string {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	default:
		return fmt.Sprint(v)
	}
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatUS prints microseconds since the epoch as a UTC time.
func formatUS(us int64) string {
	if us == 0 {
		return "–"
	}
	return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05Z")
}

func jobURL(user, job string) string {
	return "/jobs/" + url.PathEscape(user) + "/" + url.PathEscape(job)
}

func taskURL(user, job string, index int32) string {
	return jobURL(user, job) + "/tasks/" + strconv.Itoa(int(index))
}

func machineURL(name string) string { return "/machines/" + url.PathEscape(name) }

// eventsURL links the events page filtered by pairs of name, value.
func eventsURL(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return "/events"
	}
	return "/events?" + q.Encode()
}

// resources prints a resource vector for people.
func resources(r *events.Resources) string {
	if r == nil {
		return "none"
	}
	parts := []string{"cpu " + milli(r.CpuMilli), "memory " + humanBytes(r.MemoryBytes)}
	if r.DiskBytes != 0 {
		parts = append(parts, "disk "+humanBytes(r.DiskBytes))
	}
	if r.GpuMilli != 0 {
		parts = append(parts, "gpu "+milli(r.GpuMilli))
	}
	if r.Ports != 0 {
		parts = append(parts, fmt.Sprintf("ports %d", r.Ports))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// stateClass is the CSS class of a task or job state.
func stateClass(s string) string {
	switch s {
	case "running", "up":
		return "ok"
	case "finished":
		return "done"
	case "pending", "scheduled", "draining", "stopping":
		return "wait"
	case "dead", "down", "failed", "evicted", "lost", "killed":
		return "bad"
	}
	return ""
}

// coresUsed is a usage window's mean cores.
func coresUsed(u projections.Usage) float64 {
	if w := u.WindowEndUS - u.WindowStartUS; w > 0 {
		return u.CPUCoreSeconds / (float64(w) / 1e6)
	}
	return 0
}
