package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
)

// eventsFlags are `corral events`' flags.
type eventsFlags struct {
	since, job, typ, owner, stream string
	follow                         bool
	limit                          int
}

func (a *app) eventsCommand() *cobra.Command {
	var f eventsFlags
	c := &cobra.Command{
		Use:   "events",
		Short: "print the cell's log of events, filtered, or follow it",
		Example: `  corral events --job hello
  corral events --since 10m --type TaskFailed
  corral events --follow`,
		Args: args(0, 0, "no arguments (filter with flags)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request(time.Now())
			if err != nil {
				return err
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			p := &eventPrinter{a: a, w: a.stdout(), watching: f.follow, limit: f.limit}
			if a.output == "table" {
				fmt.Fprintf(p.w, "%7s  %-23s  %-20s %s\n", "POS", "TIME", "TYPE", "SUMMARY")
			}
			if f.follow {
				return p.follow(cmd.Context(), cl, req)
			}
			return p.page(cmd.Context(), cl, req)
		},
	}
	c.Flags().StringVar(&f.since, "since", "", "start at this position, or time (RFC 3339, 5m for five minutes ago, today)")
	c.Flags().StringVar(&f.job, "job", "", "only events of this job and its tasks")
	c.Flags().StringVar(&f.owner, "owner", "", "only events of this user's jobs (with --job: the job's owner)")
	c.Flags().StringVar(&f.typ, "type", "", "only events of this type, e.g. TaskFailed")
	c.Flags().StringVar(&f.stream, "stream", "", "only events whose stream starts with this, e.g. machine/m1")
	c.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing new events as they are appended")
	c.Flags().IntVarP(&f.limit, "limit", "n", 0, "print at most this many events")
	return c
}

// request is the read the flags ask for; --since is a position or a time
// before now.
func (f *eventsFlags) request(now time.Time) (*apipb.EventsRequest, error) {
	req := &apipb.EventsRequest{Job: f.job, Type: f.typ, User: f.owner, StreamPrefix: f.stream}
	if f.since == "" {
		return req, nil
	}
	pos, t, err := parsePoint(f.since, now)
	if err != nil {
		return nil, usageErr("--since: %v", err)
	}
	req.FromPosition, req.SinceUs = pos, t.UnixMicro()
	if pos > 0 {
		req.SinceUs = 0
	}
	return req, nil
}

// eventPrinter prints events in the command's output format, at most
// limit of them (0: no limit).
type eventPrinter struct {
	a        *app
	w        io.Writer
	watching bool // --follow: json and yaml print an object a line
	limit    int
	printed  int
	all      []*apipb.EventView // json and yaml without --follow: shown at the end
}

func (p *eventPrinter) full() bool { return p.limit > 0 && p.printed >= p.limit }

func (p *eventPrinter) emit(evs []*apipb.EventView) error {
	for _, e := range evs {
		if p.full() {
			return nil
		}
		p.printed++
		switch p.a.output {
		case "json", "yaml":
			if !p.watching {
				p.all = append(p.all, e)
				continue
			}
			js, err := jsonOf(e)
			if err != nil {
				return err
			}
			fmt.Fprintln(p.w, string(js))
		case "csv":
			if p.printed == 1 {
				fmt.Fprintln(p.w, "position,time,type,stream,actor,summary")
			}
			writeCSVLine(p.w, strconv.FormatInt(e.Position, 10), time.UnixMicro(e.OccurredAtUs).UTC().Format(time.RFC3339Nano), e.Type, e.Stream, e.Actor, e.Summary)
		default:
			fmt.Fprintf(p.w, "%7d  %s  %-20s %s\n", e.Position, time.UnixMicro(e.OccurredAtUs).Local().Format("2006-01-02 15:04:05.000"), e.Type, e.Summary)
		}
	}
	return nil
}

// follow prints the events the master streams until ctx ends, the stream
// does, or the limit is reached.
func (p *eventPrinter) follow(ctx context.Context, cl *client, req *apipb.EventsRequest) error {
	stream, err := cl.watch(ctx, req)
	if err != nil {
		return err
	}
	for {
		e, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || err == io.EOF {
				return nil
			}
			return err
		}
		if err := p.emit([]*apipb.EventView{e}); err != nil {
			return err
		}
		if p.full() {
			return nil
		}
	}
}

// page prints the log's events up to its head, a page at a time.
func (p *eventPrinter) page(ctx context.Context, cl *client, req *apipb.EventsRequest) error {
	for {
		l, err := readValue(ctx, cl, apipb.CellClient.Events, req)
		if err != nil {
			return err
		}
		if err := p.emit(l.Events); err != nil {
			return err
		}
		if l.NextPosition > l.Head || len(l.Events) == 0 && l.NextPosition <= req.FromPosition || p.full() {
			break
		}
		req.FromPosition, req.SinceUs = l.NextPosition, 0
	}
	if p.a.output == "json" || p.a.output == "yaml" {
		return p.a.show(nil, protoList(p.all))
	}
	if p.printed == 0 && p.a.output == "table" {
		p.a.note("no events match")
	}
	return nil
}

func writeCSVLine(w io.Writer, cells ...string) {
	for i, c := range cells {
		if strings.ContainsAny(c, ",\"\n") {
			c = `"` + strings.ReplaceAll(c, `"`, `""`) + `"`
		}
		if i > 0 {
			fmt.Fprint(w, ",")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprintln(w)
}
