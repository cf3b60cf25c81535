package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// UserHeader is the metadata key the master trusts in insecure mode only;
// an Authenticator removes it from every request.
const UserHeader = "x-corral-user"

// Service prefixes of the methods an Authenticator knows.
const (
	CellService     = "/corral.api.v1.Cell/"     // people
	RegistryService = "/corral.agent.v1.Master/" // agents register with the master
	AgentService    = "/corral.agent.v1.Agent/"  // the master polls agents
)

// Authenticator authenticates every call of a gRPC server of the cell and
// checks the caller's role against the service called:
//
//	Cell (the API)          user or admin, by certificate or token
//	Master (registration)   agent, by certificate, registering its own name
//	Agent (polls)           master, by certificate
//
// A refusal is Unauthenticated (no credentials, or unknown ones) or
// PermissionDenied naming the role needed; it is logged, not appended to
// the log: a caller that cannot prove who it is must not be able to write
// there.
type Authenticator struct {
	// Cell is the cell's name; certificates must name it.
	Cell string
	// Tokens, when set, are accepted as "authorization: Bearer" metadata.
	Tokens *Tokens
	// Roles overrides which roles may call a method; nil uses the table
	// above. Unknown methods are refused.
	Roles func(method string) []Role
	// Logger receives refusals; default slog.Default().
	Logger *slog.Logger
}

// Authenticate returns the caller's identity for a call of method.
func (a *Authenticator) Authenticate(ctx context.Context, method string) (Identity, error) {
	id, err := a.identify(ctx)
	if err != nil {
		return Identity{}, err
	}
	roles := a.roles(method)
	for _, r := range roles {
		if r == id.Role {
			return id, nil
		}
	}
	if len(roles) == 0 {
		return Identity{}, status.Errorf(codes.PermissionDenied, "%s: no role may call this method", method)
	}
	return Identity{}, status.Errorf(codes.PermissionDenied, "%s needs the %s role; the caller is %s", method, joinRoles(roles), id)
}

func (a *Authenticator) roles(method string) []Role {
	if a.Roles != nil {
		return a.Roles(method)
	}
	switch {
	case strings.HasPrefix(method, CellService):
		return []Role{RoleUser, RoleAdmin}
	case strings.HasPrefix(method, RegistryService):
		return []Role{RoleAgent}
	case strings.HasPrefix(method, AgentService):
		return []Role{RoleMaster}
	}
	return nil
}

func (a *Authenticator) identify(ctx context.Context) (Identity, error) {
	p, _ := peer.FromContext(ctx)
	var tlsInfo *credentials.TLSInfo
	if p != nil {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			tlsInfo = &ti
		}
	}
	if tlsInfo == nil {
		return Identity{}, status.Error(codes.Unauthenticated, "the connection is not TLS: this master authenticates callers; dial it with the cell's CA and a certificate or token")
	}
	if chains := tlsInfo.State.VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
		id, err := IdentityOf(a.Cell, chains[0][0])
		if err != nil {
			return Identity{}, status.Errorf(codes.Unauthenticated, "client certificate: %v", err)
		}
		return id, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if vals := md.Get("authorization"); len(vals) > 0 {
		if a.Tokens == nil {
			return Identity{}, status.Error(codes.Unauthenticated, "this server accepts no bearer tokens: present a client certificate from the cell's CA")
		}
		tok, ok := strings.CutPrefix(vals[0], "Bearer ")
		if !ok {
			return Identity{}, status.Error(codes.Unauthenticated, `authorization: want "Bearer <token>"`)
		}
		id, err := a.Tokens.Lookup(strings.TrimSpace(tok))
		if err != nil {
			return Identity{}, status.Errorf(codes.Unauthenticated, "bearer token: %v", err)
		}
		return id, nil
	}
	return Identity{}, status.Error(codes.Unauthenticated, "no credentials: present a client certificate from the cell's CA or a bearer token (corral up prints where yours are)")
}

// strip removes the header only insecure mode trusts.
func strip(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || len(md.Get(UserHeader)) == 0 {
		return ctx
	}
	md = md.Copy()
	md.Delete(UserHeader)
	return metadata.NewIncomingContext(ctx, md)
}

// registering is the request of a registration: its machine name must be
// the agent's own.
type registering interface{ GetName() string }

func (a *Authenticator) refused(method string, err error) error {
	log := a.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn("call refused", "method", method, "err", status.Convert(err).Message())
	return err
}

// Unary is the unary server interceptor.
func (a *Authenticator) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		id, err := a.Authenticate(ctx, info.FullMethod)
		if err != nil {
			return nil, a.refused(info.FullMethod, err)
		}
		if r, ok := req.(registering); ok && strings.HasPrefix(info.FullMethod, RegistryService) && r.GetName() != id.Name {
			return nil, a.refused(info.FullMethod, status.Errorf(codes.PermissionDenied,
				"agent %s may register only the machine its certificate names, not %q", id.Name, r.GetName()))
		}
		return handler(NewContext(strip(ctx), id), req)
	}
}

// Stream is the stream server interceptor.
func (a *Authenticator) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		id, err := a.Authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			return a.refused(info.FullMethod, err)
		}
		ctx := NewContext(strip(ss.Context()), id)
		tok := bearerToken(ss.Context())
		if tok == "" || a.Tokens == nil {
			return handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
		}
		// A stream lives on past the check at its start: revoking the
		// token it was opened with ends it within tokenRecheck (plus the
		// token file's reread interval).
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			t := time.NewTicker(tokenRecheck)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if _, err := a.Tokens.Lookup(tok); err != nil {
						cancel(errTokenRevoked)
						return
					}
				}
			}
		}()
		err = handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
		if errors.Is(context.Cause(ctx), errTokenRevoked) {
			return status.Error(codes.Unauthenticated, "the token this stream was opened with was revoked")
		}
		return err
	}
}

// tokenRecheck is how often a stream opened with a token checks that the
// token is still known.
const tokenRecheck = 200 * time.Millisecond

var errTokenRevoked = errors.New("token revoked")

// bearerToken is the token a call authenticated with: none when it
// presented a verified certificate, which identify prefers.
func bearerToken(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			return ""
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return ""
	}
	tok, _ := strings.CutPrefix(vals[0], "Bearer ")
	return strings.TrimSpace(tok)
}

type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }

// PeerCertificate returns the verified client certificate of a call, if any.
func PeerCertificate(ctx context.Context) (*x509.Certificate, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("no peer")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		return nil, fmt.Errorf("no verified client certificate")
	}
	return ti.State.VerifiedChains[0][0], nil
}
