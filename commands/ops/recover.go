package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Recovery turns a panic in a request handler into an error answer for that
// request, logged with the request and counted, instead of the end of the
// process: one bad request must never take the control plane down.
// grpc-go does not recover handler panics at all; net/http does, but drops
// the connection without an answer and logs only to the server's error log.
type Recovery struct {
	log    *slog.Logger
	panics *prometheus.CounterVec // where: grpc, http
}

// NewRecovery returns a Recovery logging to log (nil: slog.Default()) and
// counting corral_handler_panics_total{where} in reg (nil: not counted).
func NewRecovery(log *slog.Logger, reg prometheus.Registerer) *Recovery {
	if log == nil {
		log = slog.Default()
	}
	r := &Recovery{log: log, panics: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_handler_panics_total",
		Help: "Request handlers that panicked; each request was answered Internal and the process served on."}, []string{"where"})}
	if reg != nil {
		if err := reg.Register(r.panics); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				r.panics = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return r
}

// ServerOptions returns gRPC options that recover from panics in every
// unary and stream handler and in the interceptors inside them. Give them
// before any other interceptor so they are outermost.
func (r *Recovery) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(r.Unary()), grpc.ChainStreamInterceptor(r.Stream())}
}

// Unary recovers from a panic in a unary handler: the call fails with
// Internal.
func (r *Recovery) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				resp, err = nil, r.grpcPanic(ctx, info.FullMethod, req, p)
			}
		}()
		return handler(ctx, req)
	}
}

// Stream recovers from a panic in a stream handler: the stream ends with
// Internal.
func (r *Recovery) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = r.grpcPanic(ss.Context(), info.FullMethod, nil, p)
			}
		}()
		return handler(srv, ss)
	}
}

func (r *Recovery) grpcPanic(ctx context.Context, method string, req any, p any) error {
	r.panics.WithLabelValues("grpc").Inc()
	attrs := []slog.Attr{slog.String("method", method), slog.String("panic", fmt.Sprint(p)), slog.String("stack", string(debug.Stack()))}
	if caller := callerOf(ctx); caller != "" {
		attrs = append(attrs, slog.String("caller", caller))
	}
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		attrs = append(attrs, slog.String("peer", pr.Addr.String()))
	}
	attrs = append(attrs, requestAttrs(req)...)
	r.log.LogAttrs(ctx, slog.LevelError, "a request handler panicked; answered Internal", attrs...)
	return status.Error(codes.Internal, "the server failed on this request (a bug: it is logged); the server serves on")
}

// Handler wraps next so that a panic in it answers 500 (when nothing was
// sent yet) and is logged with the request, not only dropped with the
// connection. http.ErrAbortHandler keeps its meaning: abort quietly.
func (r *Recovery) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			r.panics.WithLabelValues("http").Inc()
			r.log.LogAttrs(req.Context(), slog.LevelError, "an HTTP handler panicked; answered 500",
				slog.String("method", req.Method), slog.String("path", req.URL.Path), slog.String("remote", req.RemoteAddr),
				slog.String("panic", fmt.Sprint(p)), slog.String("stack", string(debug.Stack())))
			if !tw.wrote {
				http.Error(w, "500 internal server error: the server failed on this request (a bug: it is logged)", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(tw, req)
	})
}

// trackingWriter records whether a response was started.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *trackingWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers (server-sent events) flush through.
func (w *trackingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.wrote = true
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
