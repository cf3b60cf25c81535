package auth

import (
	"log/slog"

	"google.golang.org/grpc"

	"github.com/corralhq/corral/agent"
)

// MaxRecvMsgSize bounds a request's size on the servers of a cell: a spec
// may be at most 1 MiB (commands.MaxSpecBytes), so 4 MiB leaves room and
// refuses anything larger with ResourceExhausted before it is decoded.
const MaxRecvMsgSize = 4 << 20

// MaxReplyMsgSize bounds a reply of the cell's API, a query's above all:
// the corral command receives up to it (gRPC's default is 4 MiB), the
// master receives its Infrastore process's replies up to it, and a query's
// reply is cut to fit it (its result's byte limit, --query-max-bytes, is
// at most this), so a big result arrives cut, never refused.
const MaxReplyMsgSize = 64 << 20

// MaxConcurrentStreams bounds the calls one connection may have open.
const MaxConcurrentStreams = 1000

// Server describes how a master serves its gRPC API (the Cell service and
// agent registration).
type Server struct {
	// Credentials are the master's. Nil is insecure mode: plaintext, and the
	// x-corral-user header names the caller (development only).
	Credentials *Credentials
	// Tokens, when set, lets people authenticate with bearer tokens.
	Tokens *Tokens
	// Limiter, when set, bounds in-flight calls and each caller's rate.
	Limiter *Limiter
	// Secrets, when set, seals secret env values and redacts replies.
	// Without it a spec giving a secret's value is refused by validation.
	Secrets *Secrets
	// MaxRecvMsgSize; default MaxRecvMsgSize.
	MaxRecvMsgSize int
	Logger         *slog.Logger
}

// Options returns the master's server options: TLS (client certificates
// verified when given), the limiter's tap (before a request is read), then
// the interceptors in order: authentication, limits, secrets.
func (s Server) Options() []grpc.ServerOption {
	size := s.MaxRecvMsgSize
	if size <= 0 {
		size = MaxRecvMsgSize
	}
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(size), grpc.MaxConcurrentStreams(MaxConcurrentStreams)}
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	if s.Credentials != nil {
		a := &Authenticator{Cell: s.Credentials.Cell, Tokens: s.Tokens, Logger: s.Logger}
		opts = append(opts, s.Credentials.ServerOption(false))
		unary, stream = append(unary, a.Unary()), append(stream, a.Stream())
	}
	if s.Limiter != nil {
		opts = append(opts, grpc.InTapHandle(s.Limiter.Tap()))
		unary, stream = append(unary, s.Limiter.Unary()), append(stream, s.Limiter.Stream())
	}
	if s.Secrets != nil {
		unary, stream = append(unary, s.Secrets.Unary()), append(stream, s.Secrets.Stream())
	}
	return append(opts, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
}

// AgentServerOptions are an agent's server options: mutual TLS that
// requires a certificate from the cell's CA, and only a master may call.
// Pass them in agent.Config.ServerOptions.
func AgentServerOptions(cr *Credentials, log *slog.Logger) []grpc.ServerOption {
	a := &Authenticator{Cell: cr.Cell, Logger: log}
	return []grpc.ServerOption{
		cr.ServerOption(true),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.ChainUnaryInterceptor(a.Unary()),
		grpc.ChainStreamInterceptor(a.Stream()),
	}
}

// AgentDialOptions are what an agent dials its master with (registration):
// its certificate, and the master must show a master's. Pass them in
// agent.Config.MasterDialOptions.
func AgentDialOptions(cr *Credentials) []grpc.DialOption {
	return []grpc.DialOption{cr.DialOption(RoleMaster)}
}

// LinkDial is the master's LinkConfig.Dial: mutual TLS with the master's
// certificate to agents that must show an agent's, and, with secrets, the
// job's secret values opened into the starts it sends.
func LinkDial(cr *Credentials, secrets *Secrets) func(addr string) (*agent.Client, error) {
	opts := []grpc.DialOption{cr.DialOption(RoleAgent)}
	if secrets != nil {
		opts = append(opts, grpc.WithUnaryInterceptor(secrets.UnsealPolls()))
	}
	return func(addr string) (*agent.Client, error) { return agent.Dial(addr, opts...) }
}
