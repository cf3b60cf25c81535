package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Limiter sheds load at the API's door. Two bounds, both answered with
// ResourceExhausted at once, never by waiting:
//
//   - MaxInFlight unary calls at a time, over all callers: a master that
//     is behind serves what it admitted in bounded time instead of letting
//     a queue (and every caller's latency) grow without end.
//   - A token bucket per caller (Rate per second, Burst at once), so one
//     user's burst cannot take the whole of the MaxInFlight slots.
//
// Watch streams are long-lived: their opening is rate limited, not counted
// in flight.
//
// Tap, installed with grpc.InTapHandle, applies both before the server
// reads the request or starts a goroutine for it: a refusal then costs
// little more than the request's headers, which is what keeps a master at
// ten times its capacity answering.
type Limiter struct {
	// Rate is each caller's sustained requests per second; 0 disables the
	// per-caller limit.
	Rate float64
	// Burst is how many requests a caller may make at once (default
	// max(1, Rate)).
	Burst int
	// MaxInFlight bounds unary calls being served; 0 disables it.
	MaxInFlight int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Exempt, when set, names methods no limit applies to (e.g. Status).
	Exempt func(method string) bool

	inFlight atomic.Int64
	mu       sync.Mutex
	buckets  map[string]*bucket
	// Refused counts calls refused, for tests and metrics.
	Refused atomic.Int64
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxIdleBuckets: past this many callers, idle full buckets are dropped.
const maxIdleBuckets = 100_000

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Limiter) burst() float64 {
	if l.Burst > 0 {
		return float64(l.Burst)
	}
	return max(1, l.Rate)
}

// Allow takes a token from caller's bucket, or says how long until one is
// there.
func (l *Limiter) Allow(caller string) (bool, time.Duration) {
	if l.Rate <= 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[caller]
	if b == nil {
		if len(l.buckets) >= maxIdleBuckets {
			l.sweepLocked(now)
		}
		b = &bucket{tokens: l.burst(), last: now}
		l.buckets[caller] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(l.burst(), b.tokens+el*l.Rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.Rate * float64(time.Second))
}

// sweepLocked drops buckets that have refilled: a new bucket starts full,
// so forgetting them changes nothing.
func (l *Limiter) sweepLocked(now time.Time) {
	full := time.Duration(l.burst() / l.Rate * float64(time.Second))
	for k, b := range l.buckets {
		if now.Sub(b.last) >= full {
			delete(l.buckets, k)
		}
	}
}

// caller names who a call is from: its identity; before authentication
// (Tap), its verified certificate or its token's hash; else (insecure
// mode) the user header; else everyone unnamed shares one bucket.
func caller(ctx context.Context, md metadata.MD) string {
	if id, ok := FromContext(ctx); ok {
		return string(id.Role) + "/" + id.Name
	}
	if cert, err := PeerCertificate(ctx); err == nil && len(cert.Subject.OrganizationalUnit) == 1 {
		return strings.TrimPrefix(cert.Subject.OrganizationalUnit[0], ouPrefix) + "/" + cert.Subject.CommonName
	}
	if md == nil {
		md, _ = metadata.FromIncomingContext(ctx)
	}
	if a := md.Get("authorization"); len(a) > 0 {
		h := sha256.Sum256([]byte(a[0]))
		return "token/" + hex.EncodeToString(h[:8])
	}
	if u := md.Get(UserHeader); len(u) > 0 {
		return "header/" + u[0]
	}
	return "anonymous"
}

type tappedKey struct{}

// Tap is the limiter as a gRPC tap handle (grpc.InTapHandle): the caller's
// bucket is charged and the in-flight bound checked before the request is
// read. The interceptors then only count calls in flight.
func (l *Limiter) Tap() tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if err := l.admit(ctx, info.FullMethodName, info.Header); err != nil {
			return ctx, err
		}
		if l.MaxInFlight > 0 && l.inFlight.Load() >= int64(l.MaxInFlight) && (l.Exempt == nil || !l.Exempt(info.FullMethodName)) {
			l.Refused.Add(1)
			return ctx, l.full()
		}
		return context.WithValue(ctx, tappedKey{}, true), nil
	}
}

func (l *Limiter) full() error {
	return status.Errorf(codes.ResourceExhausted, "the master is serving its limit of %d requests; retry after a short backoff", l.MaxInFlight)
}

func (l *Limiter) admit(ctx context.Context, method string, md metadata.MD) error {
	if l.Exempt != nil && l.Exempt(method) {
		return nil
	}
	if ctx.Value(tappedKey{}) != nil {
		return nil // charged by Tap
	}
	who := caller(ctx, md)
	if ok, wait := l.Allow(who); !ok {
		l.Refused.Add(1)
		return status.Errorf(codes.ResourceExhausted, "rate limit: %s may make %.0f requests a second (bursts of %.0f); retry in %s",
			who, l.Rate, l.burst(), wait.Round(time.Millisecond))
	}
	return nil
}

// Unary is the unary server interceptor. Put it after the Authenticator,
// so callers are known.
func (l *Limiter) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := l.admit(ctx, info.FullMethod, nil); err != nil {
			return nil, err
		}
		if l.MaxInFlight > 0 && (l.Exempt == nil || !l.Exempt(info.FullMethod)) {
			if n := l.inFlight.Add(1); n > int64(l.MaxInFlight) {
				l.inFlight.Add(-1)
				l.Refused.Add(1)
				return nil, l.full()
			}
			defer l.inFlight.Add(-1)
		}
		return handler(ctx, req)
	}
}

// Stream is the stream server interceptor: it limits the opening of
// streams.
func (l *Limiter) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := l.admit(ss.Context(), info.FullMethod, nil); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}
