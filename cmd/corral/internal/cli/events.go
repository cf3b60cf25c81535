package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/spf13/cobra"
)

func (a *app) eventsCommand() *cobra.Command {
	var since, job, typ, owner, stream string
	var follow bool
	var limit int
	c := &cobra.Command{
		Use:   "events",
		Short: "print the cell's log of events, filtered, or follow it",
		Example: `  corral events --job hello
  corral events --since 10m --type TaskFailed
  corral events --follow`,
		Args: args(0, 0, "no arguments (filter with flags)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &apipb.EventsRequest{Job: job, Type: typ, User: owner, StreamPrefix: stream}
			if since != "" {
				pos, t, err := parsePoint(since, time.Now())
				if err != nil {
					return usageErr("--since: %v", err)
				}
				req.FromPosition, req.SinceUs = pos, t.UnixMicro()
				if pos > 0 {
					req.SinceUs = 0
				}
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := cmd.Context()
			w := a.stdout()
			var all []*apipb.EventView
			printed := 0
			emit := func(evs []*apipb.EventView) error {
				for _, e := range evs {
					if limit > 0 && printed >= limit {
						return nil
					}
					printed++
					switch a.output {
					case "json", "yaml":
						if follow {
							js, err := jsonOf(e)
							if err != nil {
								return err
							}
							fmt.Fprintln(w, string(js))
						} else {
							all = append(all, e)
						}
					case "csv":
						if printed == 1 {
							fmt.Fprintln(w, "position,time,type,stream,actor,summary")
						}
						writeCSVLine(w, strconv.FormatInt(e.Position, 10), time.UnixMicro(e.OccurredAtUs).UTC().Format(time.RFC3339Nano), e.Type, e.Stream, e.Actor, e.Summary)
					default:
						fmt.Fprintf(w, "%7d  %s  %-20s %s\n", e.Position, time.UnixMicro(e.OccurredAtUs).Local().Format("2006-01-02 15:04:05.000"), e.Type, e.Summary)
					}
				}
				return nil
			}
			if a.output == "table" && !follow {
				fmt.Fprintf(w, "%7s  %-23s  %-20s %s\n", "POS", "TIME", "TYPE", "SUMMARY")
			}
			if follow {
				if a.output == "table" {
					fmt.Fprintf(w, "%7s  %-23s  %-20s %s\n", "POS", "TIME", "TYPE", "SUMMARY")
				}
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
					if err := emit([]*apipb.EventView{e}); err != nil {
						return err
					}
					if limit > 0 && printed >= limit {
						return nil
					}
				}
			}
			for {
				l, err := readValue(ctx, cl, apipb.CellClient.Events, req)
				if err != nil {
					return err
				}
				if err := emit(l.Events); err != nil {
					return err
				}
				if l.NextPosition > l.Head || len(l.Events) == 0 && l.NextPosition <= req.FromPosition || (limit > 0 && printed >= limit) {
					break
				}
				req.FromPosition, req.SinceUs = l.NextPosition, 0
			}
			if a.output == "json" || a.output == "yaml" {
				return a.show(nil, protoList(all))
			}
			if printed == 0 && a.output == "table" {
				a.note("no events match")
			}
			return nil
		},
	}
	c.Flags().StringVar(&since, "since", "", "start at this position, or time (RFC 3339, 5m for five minutes ago, today)")
	c.Flags().StringVar(&job, "job", "", "only events of this job and its tasks")
	c.Flags().StringVar(&owner, "owner", "", "only events of this user's jobs (with --job: the job's owner)")
	c.Flags().StringVar(&typ, "type", "", "only events of this type, e.g. TaskFailed")
	c.Flags().StringVar(&stream, "stream", "", "only events whose stream starts with this, e.g. machine/m1")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events as they are appended")
	c.Flags().IntVarP(&limit, "limit", "n", 0, "print at most this many events")
	return c
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
