package webui

import (
	"context"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
)

// The SQL console's schema panel: every table, view and macro with its
// columns, as the Infrastore describes them (the Query call's describe,
// so the same path and authorization as the console's queries, and the
// same answer as `corral sql --describe`).

// schemaTimeout bounds the panel's two questions: the console is usable
// without the panel.
const schemaTimeout = 5 * time.Second

type schemaTable struct {
	Name, Signature, Kind, Description string
	Columns                            []schemaColumn
}

type schemaColumn struct{ Name, Type, Description string }

// schema asks the Infrastore for the tables and every table's columns. It
// returns nothing and no error when the master runs no Infrastore (the
// page says so already).
func (h *Handler) schema(r *http.Request) ([]schemaTable, error) {
	ctx, cancel := context.WithTimeout(h.ctx(r), schemaTimeout)
	defer cancel()
	tables, err := h.cfg.API.Query(ctx, &apipb.QueryRequest{Describe: &apipb.DescribeRequest{}})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	columns, err := h.cfg.API.Query(ctx, &apipb.QueryRequest{Describe: &apipb.DescribeRequest{Columns: true}})
	if err != nil {
		return nil, err
	}
	out := make([]schemaTable, 0, len(tables.Rows))
	at := map[string]int{}
	for _, row := range tables.Rows {
		if len(row.Values) < 3 {
			continue
		}
		sig := row.Values[0]
		name, _, _ := strings.Cut(sig, "(")
		at[name] = len(out)
		out = append(out, schemaTable{Name: name, Signature: sig, Kind: row.Values[1], Description: row.Values[2]})
	}
	for _, row := range columns.Rows {
		if len(row.Values) < 4 {
			continue
		}
		if i, ok := at[row.Values[0]]; ok {
			out[i].Columns = append(out[i].Columns, schemaColumn{Name: row.Values[1], Type: row.Values[2], Description: row.Values[3]})
		}
	}
	return out, nil
}
