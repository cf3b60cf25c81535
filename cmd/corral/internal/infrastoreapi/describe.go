package infrastoreapi

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
)

// describe answers a QueryRequest's describe (the Infrastore's Describe) as a
// query's reply, so that it travels, prints and downloads as one: the
// tables, every table's columns, or one table's columns.
func (s *Store) describe(ctx context.Context, r *apipb.DescribeRequest) (*apipb.QueryReply, error) {
	if r.Table != "" && r.Columns {
		return nil, status.Error(codes.InvalidArgument, "describe.columns: lists every table's columns; give no table with it")
	}
	ts, err := s.is.Describe(ctx, r.Table)
	if err != nil {
		return nil, statusOf(err)
	}
	out := &apipb.QueryReply{}
	add := func(values ...string) {
		out.Rows = append(out.Rows, &apipb.QueryRow{Values: values, Null: make([]bool, len(values))})
	}
	switch {
	case r.Table != "":
		t := ts[0]
		out.Title = t.Signature() + " (" + t.Kind + "): " + t.Description
		out.Columns = []string{"column", "type", "description"}
		for _, c := range t.Columns {
			add(c.Name, c.Type, c.Description)
		}
	case r.Columns:
		out.Columns = []string{"table", "column", "type", "description"}
		for _, t := range ts {
			for _, c := range t.Columns {
				add(t.Name, c.Name, c.Type, c.Description)
			}
		}
	default:
		out.Columns = []string{"name", "kind", "description"}
		for _, t := range ts {
			add(t.Signature(), t.Kind, t.Description)
		}
	}
	out.Types = make([]string, len(out.Columns))
	for i := range out.Types {
		out.Types[i] = "VARCHAR"
	}
	if pos, err := s.is.Position(ctx); err == nil {
		out.Position = pos
	}
	return out, nil
}
