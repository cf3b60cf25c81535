package cli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/corralhq/corral/events"
)

// table is what a verb shows people: columns and rows of text.
type table struct {
	cols []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// writeTable prints t aligned, or as CSV.
func writeTable(w io.Writer, t *table, format string) error {
	if format == "csv" {
		cw := csv.NewWriter(w)
		cols := make([]string, len(t.cols))
		for i, c := range t.cols {
			// Headers written for people (JOB, CPU USED) become
			// csv-friendly names; others (SQL columns) stay as they are.
			if c == strings.ToUpper(c) {
				c = strings.ToLower(strings.ReplaceAll(c, " ", "_"))
			}
			cols[i] = c
		}
		if err := cw.Write(cols); err != nil {
			return err
		}
		if err := cw.WriteAll(t.rows); err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.cols, "\t"))
	for _, r := range t.rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = strings.ReplaceAll(strings.ReplaceAll(c, "\t", " "), "\n", " ")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

var protoJSON = protojson.MarshalOptions{UseProtoNames: true}

// jsonOf renders v as JSON: protobuf messages by protojson (field names as
// in the .proto), lists of them as arrays, anything else by encoding/json.
func jsonOf(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case proto.Message:
		return protoJSON.Marshal(x)
	case json.RawMessage:
		return x, nil
	}
	return json.Marshal(v)
}

// protoList renders messages for jsonOf.
func protoList[T proto.Message](xs []T) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(xs))
	for _, x := range xs {
		b, err := protoJSON.Marshal(x)
		if err != nil {
			b, _ = json.Marshal(err.Error())
		}
		out = append(out, b)
	}
	return out
}

// show prints a verb's result: t for table and csv, v for json and yaml.
func (a *app) show(t *table, v any) error {
	return show(a.stdout(), a.output, t, v)
}

func show(w io.Writer, format string, t *table, v any) error {
	switch format {
	case "json", "yaml":
		js, err := jsonOf(v)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if format == "json" {
			if err := json.Indent(&buf, js, "", "  "); err != nil {
				return err
			}
			buf.WriteByte('\n')
		} else {
			y, err := yaml.JSONToYAML(js)
			if err != nil {
				return err
			}
			buf.Write(y)
		}
		_, err = w.Write(buf.Bytes())
		return err
	}
	if t == nil {
		return nil
	}
	return writeTable(w, t, format)
}

// ---- formatting of values for tables ---------------------------------------

func cores(milli int64) string {
	if milli%1000 == 0 {
		return strconv.FormatInt(milli/1000, 10)
	}
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

// bytesHuman prints a size in binary units with at most one decimal.
func bytesHuman(n int64) string {
	if n == 0 {
		return "0"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, i := math.Abs(float64(n)), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	sign := ""
	if n < 0 {
		sign = "-"
	}
	if i == 0 || f == math.Trunc(f) {
		return sign + strconv.FormatInt(int64(f), 10) + units[i]
	}
	return sign + strconv.FormatFloat(f, 'f', 1, 64) + units[i]
}

func resourcesText(r *events.Resources) string {
	if r == nil {
		return "-"
	}
	parts := []string{"cpu " + cores(r.CpuMilli), "mem " + bytesHuman(r.MemoryBytes)}
	if r.DiskBytes != 0 {
		parts = append(parts, "disk "+bytesHuman(r.DiskBytes))
	}
	if r.Ports != 0 {
		parts = append(parts, "ports "+strconv.Itoa(int(r.Ports)))
	}
	if r.GpuMilli != 0 {
		parts = append(parts, "gpu "+cores(r.GpuMilli))
	}
	return strings.Join(parts, ", ")
}

// ago prints how long ago a time in microseconds was, e.g. "3m12s".
func ago(us int64, now time.Time) string {
	if us == 0 {
		return "-"
	}
	d := now.Sub(time.UnixMicro(us))
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return d.Truncate(time.Second).String()
	case d < time.Hour:
		return d.Truncate(time.Second).String()
	case d < 48*time.Hour:
		return d.Truncate(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func timeText(us int64) string {
	if us == 0 {
		return "-"
	}
	return time.UnixMicro(us).Local().Format("2006-01-02 15:04:05.000")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
