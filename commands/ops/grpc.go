package ops

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
)

// ServerOptions returns the gRPC server options that recover from a panic
// in any handler (Recovery: the request is answered Internal, the server
// serves on), and count and time every request (corral_api_requests_total,
// corral_api_request_duration_seconds) and log it to log: mutations at Info
// with the caller, the job and the positions appended; reads at Debug;
// failures the server is to blame for (Internal, Unavailable, Unknown,
// DataLoss) at Warn. log may be nil: no access log. Given before auth's
// interceptors, they also count the requests auth refuses, and recover from
// panics in auth too; the caller then comes from the x-corral-user header
// only (auth's identity is set inside).
func (mm *Master) ServerOptions(log *slog.Logger) []grpc.ServerOption {
	rec := NewRecovery(log, mm.reg)
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(rec.Unary(), mm.UnaryInterceptor(log)),
		grpc.ChainStreamInterceptor(rec.Stream(), mm.StreamInterceptor(log)),
	}
}

// UnaryInterceptor counts, times and logs unary requests.
func (mm *Master) UnaryInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		mm.done(ctx, log, info.FullMethod, start, req, resp, err)
		return resp, err
	}
}

// StreamInterceptor counts, times and logs streams (Watch) when they end.
func (mm *Master) StreamInterceptor(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		mm.done(ss.Context(), log, info.FullMethod, start, nil, nil, err)
		return err
	}
}

// splitMethod turns "/corral.api.v1.Cell/Submit" into "Cell", "Submit".
func splitMethod(full string) (string, string) {
	full = strings.TrimPrefix(full, "/")
	svc, method, ok := strings.Cut(full, "/")
	if !ok {
		return "unknown", full
	}
	if i := strings.LastIndexByte(svc, '.'); i >= 0 {
		svc = svc[i+1:]
	}
	return svc, method
}

func (mm *Master) done(ctx context.Context, log *slog.Logger, full string, start time.Time, req, resp any, err error) {
	took := time.Since(start)
	svc, method := splitMethod(full)
	code := status.Code(err)
	mm.api.WithLabelValues(svc, method, code.String()).Inc()
	mm.apiDur.WithLabelValues(svc, method).Observe(took.Seconds())
	if log == nil {
		return
	}
	mutation, ok := resp.(*apipb.MutationReply)
	level := slog.LevelDebug
	switch {
	case code == codes.Internal || code == codes.Unavailable || code == codes.Unknown || code == codes.DataLoss:
		level = slog.LevelWarn
	case ok || isMutation(req):
		level = slog.LevelInfo
	}
	if !log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("method", svc+"/"+method), slog.String("code", code.String()), slog.Duration("took", took)}
	if caller := callerOf(ctx); caller != "" {
		attrs = append(attrs, slog.String("caller", caller))
	}
	attrs = append(attrs, requestAttrs(req)...)
	if ok && mutation != nil && mutation.LastPosition > 0 {
		attrs = append(attrs, slog.Int64("position", mutation.LastPosition), slog.Int("events", int(mutation.Events)))
		if mutation.Duplicate {
			attrs = append(attrs, slog.Bool("duplicate", true))
		}
	}
	if err != nil {
		attrs = append(attrs, slog.String("err", status.Convert(err).Message()))
	}
	log.LogAttrs(ctx, level, "api request", attrs...)
}

// callerOf names who called: the identity auth's interceptor established
// (when these interceptors run inside it), else the x-corral-user header
// of an insecure link.
func callerOf(ctx context.Context) string {
	if id, ok := auth.FromContext(ctx); ok {
		return id.Name
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if u := md.Get("x-corral-user"); len(u) > 0 {
			return u[0]
		}
	}
	return ""
}

// isMutation reports whether req asks for a change (it carries a request
// id).
func isMutation(req any) bool {
	r, ok := req.(interface{ GetRequestId() string })
	return ok && r.GetRequestId() != ""
}

// requestAttrs names what a request is about: user, job, task (its index),
// machine, and the request id.
func requestAttrs(req any) []slog.Attr {
	var out []slog.Attr
	user, job := "", ""
	if r, ok := req.(interface{ GetUser() string }); ok {
		user = r.GetUser()
	}
	if r, ok := req.(interface{ GetJob() string }); ok {
		job = r.GetJob()
	}
	if r, ok := req.(interface{ GetSpec() *events.JobSpec }); ok && job == "" {
		job = r.GetSpec().GetName()
	}
	if user != "" {
		out = append(out, slog.String("user", user))
	}
	if job != "" {
		out = append(out, slog.String("job", job))
	}
	if r, ok := req.(*apipb.KillTaskRequest); ok {
		out = append(out, slog.Int("task", int(r.Index)))
	}
	if r, ok := req.(interface{ GetMachine() string }); ok && r.GetMachine() != "" {
		out = append(out, slog.String("machine", r.GetMachine()))
	}
	if r, ok := req.(interface{ GetRequestId() string }); ok && r.GetRequestId() != "" {
		out = append(out, slog.String("request_id", r.GetRequestId()))
	}
	return out
}
