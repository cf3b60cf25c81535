package infrastoreapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/infrastore"
	"github.com/corralhq/corral/projections"
)

// Options for Open.
type Options struct {
	ReadOnly bool
	// Cell names the cell in FOCUS exports (billing account, region).
	// Opened for writing (the master's Infrastore), it is recorded in the
	// file; read-only, it must be the name the file records, and names the
	// cell of a file that records none.
	Cell string
	// MaxRows bounds a query's reply (default 10,000).
	MaxRows int
	// QueryTimeout is the default and maximum time of a query (default 30 s).
	QueryTimeout time.Duration
	// MaxResultBytes bounds the values of a reply (the Infrastore's default
	// when 0).
	MaxResultBytes int64
	// MemoryLimit and Threads are DuckDB's (its defaults when empty or 0).
	MemoryLimit string
	Threads     int
	// MemoryBudget is the process's memory, near which queries are
	// interrupted (infrastore.Options.MemoryBudget); 0: none.
	MemoryBudget int64
}

// Store is an open Infrastore file.
type Store struct {
	is      *infrastore.Infrastore
	cell    string
	timeout time.Duration
}

// Open opens the Infrastore file at path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.MaxRows <= 0 {
		opts.MaxRows = 10_000
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = 30 * time.Second
	}
	is, err := infrastore.Open(ctx, path, infrastore.Options{ReadOnly: opts.ReadOnly, MaxRows: opts.MaxRows,
		QueryTimeout: opts.QueryTimeout, MaxResultBytes: opts.MaxResultBytes, MemoryLimit: opts.MemoryLimit, Threads: opts.Threads,
		MemoryBudget: opts.MemoryBudget})
	if err != nil {
		return nil, err
	}
	// The master's writer records the cell's name in the file, so that a
	// bill from a copy of it (read-only) names the same cell; a reader's
	// cell only has to match it (infrastore.SetCell, FocusRequest.Cell).
	if !opts.ReadOnly && opts.Cell != "" {
		if err := is.SetCell(ctx, opts.Cell); err != nil {
			is.Close()
			return nil, err
		}
	}
	return &Store{is: is, cell: opts.Cell, timeout: opts.QueryTimeout}, nil
}

// Log reads the log back from the file's events table.
func (s *Store) Log() projections.Source { return s.is.Log() }

// Close closes the file.
func (s *Store) Close() error { return s.is.Close() }

// Position is the last log position the file holds.
func (s *Store) Position(ctx context.Context) (int64, error) { return s.is.Position(ctx) }

// Run ingests the log until ctx ends (infrastore.Infrastore.Run: catch up,
// then follow the event feed, rebuilding a file of another schema version).
func (s *Store) Run(ctx context.Context, store events.Tailer) error {
	if err := s.is.Run(ctx, store); ctx.Err() == nil {
		return err
	}
	return nil
}

// Rebuild re-derives every table from the log.
func (s *Store) Rebuild(ctx context.Context, store events.Reader) (int64, error) {
	return s.is.Rebuild(ctx, store)
}

// ImportGoogleTrace loads the public Google trace in dir.
func (s *Store) ImportGoogleTrace(ctx context.Context, dir string) (string, error) {
	st, err := s.is.ImportGoogleTrace(ctx, dir)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("imported %d task events and %d job events from %d files", st.TaskEvents, st.JobEvents, st.Files), nil
}

// Query runs a read-only statement, or describes the schema when the
// request says describe (api.Analytics).
func (s *Store) Query(ctx context.Context, r *apipb.QueryRequest) (*apipb.QueryReply, error) {
	if r.Describe != nil && r.Sql != "" {
		return nil, status.Error(codes.InvalidArgument, "sql: give a query or describe, not both")
	}
	if r.MinPosition > 0 {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.is.WaitPosition(wctx, r.MinPosition)
		cancel()
		if err != nil {
			pos, _ := s.is.Position(ctx)
			return nil, status.Errorf(codes.Unavailable, "the Infrastore has ingested up to position %d, not yet %d; retry in a moment", pos, r.MinPosition)
		}
	}
	timeout := time.Duration(r.TimeoutMs) * time.Millisecond
	if timeout <= 0 || timeout > s.timeout {
		timeout = s.timeout
	}
	if r.Describe != nil {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return s.describe(ctx, r.Describe)
	}
	res, err := s.is.Query(ctx, r.Sql, timeout)
	if errors.Is(err, infrastore.ErrQueryTimeout) {
		return nil, status.Error(codes.DeadlineExceeded, err.Error()+"; narrow the query, or raise its time limit (corral sql --timeout, at most the Infrastore's limit of "+s.timeout.String()+": corral master or up --query-timeout)")
	}
	if err != nil {
		return nil, statusOf(err)
	}
	out := &apipb.QueryReply{Columns: res.Columns, Types: res.Types, Truncated: res.Truncated, TruncatedBy: res.TruncatedBy}
	if pos, err := s.is.Position(ctx); err == nil {
		out.Position = pos
	}
	// Each cell as the Infrastore renders it in its column's type; NULL
	// is flagged apart from the empty string. The reply is cut where it
	// would pass what a client receives (auth.MaxReplyMsgSize), less room
	// for the master's own framing.
	size := proto.Size(out)
	for i := range res.Rows {
		qr := &apipb.QueryRow{Values: make([]string, len(res.Columns)), Null: make([]bool, len(res.Columns))}
		for j := range res.Columns {
			text, null := res.Cell(i, j)
			if null {
				text = "NULL"
			}
			qr.Values[j], qr.Null[j] = text, null
		}
		// A repeated message field costs its size, a tag and a length.
		n := proto.Size(qr)
		size += n + 1 + protowire.SizeVarint(uint64(n))
		if size > maxReplyBytes {
			out.Truncated = true
			out.TruncatedBy = fmt.Sprintf("the %d-byte limit of a reply", maxReplyBytes)
			break
		}
		out.Rows = append(out.Rows, qr)
	}
	return out, nil
}

// maxReplyBytes is the most a query's reply may encode to.
const maxReplyBytes = auth.MaxReplyMsgSize - 64<<10

// Bill computes and exports a bill (api.Analytics).
func (s *Store) Bill(ctx context.Context, r *apipb.BillRequest) (*apipb.BillReply, error) {
	req := infrastore.BillRequest{From: time.UnixMicro(r.FromUs), To: time.UnixMicro(r.ToUs), GroupBy: r.GroupBy, User: r.User}
	if r.FromUs == 0 {
		req.From = time.Time{}
	}
	if r.ToUs == 0 {
		req.To = time.Time{}
	}
	if r.RatesJson != "" {
		rates, err := infrastore.ParseRates([]byte(r.RatesJson))
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "rates: %v", err)
		}
		req.Rates = rates
	}
	format := r.Format
	if format == "" {
		format = infrastore.FormatCSV
	}
	b, err := s.is.Bill(ctx, req)
	if err != nil {
		return nil, statusOf(err)
	}
	var buf bytes.Buffer
	if err := b.Export(ctx, &buf, format); err != nil {
		return nil, statusOf(err)
	}
	return &apipb.BillReply{Data: buf.Bytes(), Format: format}, nil
}

// Costs computes a period's showback (api.Analytics).
func (s *Store) Costs(ctx context.Context, r *apipb.CostsRequest) (*apipb.CostsReply, error) {
	req := infrastore.CostsRequest{Cell: s.cell, Label: r.Label, Top: int(r.Top), User: r.User}
	if r.FromUs != 0 {
		req.From = time.UnixMicro(r.FromUs)
	}
	if r.ToUs != 0 {
		req.To = time.UnixMicro(r.ToUs)
	}
	c, err := s.is.Costs(ctx, req)
	if err != nil {
		return nil, statusOf(err)
	}
	series := func(cs infrastore.CostSeries) *apipb.CostSeries {
		return &apipb.CostSeries{Name: cs.Name, Costs: cs.Costs, Total: cs.Total.String()}
	}
	out := &apipb.CostsReply{Currency: c.Currency, Label: c.Label, StepUs: c.Step.Microseconds(), Idle: series(c.Idle),
		Corrections: c.Corrections.String(), Total: c.Total.String(), User: c.User}
	for _, b := range c.Buckets {
		out.BucketUs = append(out.BucketUs, b.UnixMicro())
	}
	for _, group := range []struct {
		from []infrastore.CostSeries
		to   *[]*apipb.CostSeries
	}{{c.Users, &out.Users}, {c.Teams, &out.Teams}, {c.Bands, &out.Bands}} {
		for _, cs := range group.from {
			*group.to = append(*group.to, series(cs))
		}
	}
	for _, j := range c.TopJobs {
		out.TopJobs = append(out.TopJobs, &apipb.JobCost{User: j.User, Job: j.Job, Team: j.Team, Total: j.Total.String()})
	}
	return out, nil
}

// Bill formats of the FOCUS export.
const (
	FormatFocus        = "focus"         // FOCUS as CSV
	FormatFocusParquet = "focus-parquet" // FOCUS as Parquet
)

// ExportBill writes a bill through send in chunks of at most 1 MiB: the
// FOCUS export (format focus or focus-parquet) row by row, or the summary.
func (s *Store) ExportBill(ctx context.Context, r *apipb.BillRequest, send func([]byte) error) error {
	w := &chunkWriter{send: send, buf: make([]byte, 0, 1<<20)}
	switch r.Format {
	case FormatFocus, FormatFocusParquet:
		req := infrastore.FocusRequest{Cell: s.cell, Granularity: r.Granularity, AccountBy: r.AccountBy, Idle: r.Idle, Explain: r.Explain, User: r.User}
		if r.FromUs != 0 {
			req.From = time.UnixMicro(r.FromUs)
		}
		if r.ToUs != 0 {
			req.To = time.UnixMicro(r.ToUs)
		}
		if r.Format == FormatFocusParquet {
			req.Format = infrastore.FormatParquet
		}
		if err := s.is.ExportFocus(ctx, req, w); err != nil {
			return statusOf(err)
		}
	default:
		rep, err := s.Bill(ctx, r)
		if err != nil {
			return err
		}
		if _, err := w.Write(rep.Data); err != nil {
			return err
		}
	}
	return w.flush()
}

// chunkWriter sends what is written in chunks.
type chunkWriter struct {
	send func([]byte) error
	buf  []byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(w.buf)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(w.buf)
	w.buf = w.buf[:0]
	return err
}

// statusOf maps the Infrastore's errors to gRPC statuses.
func statusOf(err error) error {
	switch {
	case errors.Is(err, infrastore.ErrQueryRefused), errors.Is(err, infrastore.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, infrastore.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, infrastore.ErrQueryTooBig):
		return status.Error(codes.ResourceExhausted, err.Error()+"; narrow the query")
	case errors.Is(err, infrastore.ErrQueryTimeout), errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error()+"; narrow the query or raise --timeout")
	case errors.Is(err, infrastore.ErrRebuildNeeded):
		return status.Error(codes.FailedPrecondition, err.Error()+": run `corral infrastore rebuild`")
	case errors.Is(err, infrastore.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
