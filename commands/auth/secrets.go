package auth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Redacted is what replies show in place of a secret's value. Sent back in
// an update, it means "keep the value the job has".
const Redacted = "<redacted>"

// sealVersion heads every sealed blob.
const sealVersion = 1

// Sealer seals and opens the secret env values of jobs with AES-256-GCM.
// The additional data is the job's user and name, so a sealed blob copied
// into another job's spec does not open. The nonce is derived from the
// key, the job and the plaintext (a synthetic IV): the same secrets of the
// same job seal to the same bytes, so resubmitting an unchanged spec
// changes nothing, and a nonce is never reused for different plaintexts.
type Sealer struct {
	aead     cipher.AEAD
	nonceKey []byte
}

// NewSealer returns the sealer of a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secrets key: %d bytes, want 32", len(key))
	}
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("corral seal v1 encryption"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, nonceKey: derive("corral seal v1 nonce")}, nil
}

// LoadSealer reads a secrets key file; it must not be readable by others.
func LoadSealer(path string) (*Sealer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets key %s: mode %v lets others read it; chmod 600", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return NewSealer(b)
}

func aad(user, job string) []byte { return []byte("corral/v1/" + user + "/" + job) }

// Seal returns the sealed form of a job's secret env values; nil for none.
func (s *Sealer) Seal(user, job string, env map[string]string) ([]byte, error) {
	if len(env) == 0 {
		return nil, nil
	}
	pt, err := json.Marshal(env) // keys sorted: deterministic
	if err != nil {
		return nil, err
	}
	ad := aad(user, job)
	m := hmac.New(sha256.New, s.nonceKey)
	m.Write(ad)
	m.Write([]byte{0})
	m.Write(pt)
	nonce := m.Sum(nil)[:s.aead.NonceSize()]
	out := append([]byte{sealVersion}, nonce...)
	return s.aead.Seal(out, nonce, pt, ad), nil
}

// Open returns the env values sealed for user's job.
func (s *Sealer) Open(user, job string, sealed []byte) (map[string]string, error) {
	if len(sealed) == 0 {
		return nil, nil
	}
	ns := s.aead.NonceSize()
	if sealed[0] != sealVersion || len(sealed) < 1+ns+s.aead.Overhead() {
		return nil, errors.New("sealed_env: not a sealed blob of this version")
	}
	pt, err := s.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], aad(user, job))
	if err != nil {
		return nil, fmt.Errorf("sealed_env of job %s/%s: does not open with this cell's key (sealed for another job or cell)", user, job)
	}
	var env map[string]string
	if err := json.Unmarshal(pt, &env); err != nil {
		return nil, fmt.Errorf("sealed_env of job %s/%s: %w", user, job, err)
	}
	return env, nil
}

// Secrets keeps the values of a spec's secret_env out of the log. Its
// server interceptors, on the master's API, seal them before the command is
// decided and redact them from every reply; its client interceptor, on the
// link's connections to agents, opens them into the StartTask (and
// UpdateTask) an agent receives.
type Secrets struct {
	Sealer *Sealer
	// View runs fn on the master's state under its read lock (Master.View):
	// updates keep the values they do not repeat, and the link finds a
	// task's sealed values.
	View   func(fn func(s *projections.State))
	Logger *slog.Logger
}

func (s *Secrets) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func userOf(ctx context.Context) string {
	if id, ok := FromContext(ctx); ok {
		return id.Name
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if u := md.Get(UserHeader); len(u) > 0 {
		return u[0]
	}
	return ""
}

// seal moves the values of spec's secret names out of env into sealed_env.
// With keep, values not given (or given as Redacted) are those of the
// job's current spec.
func (s *Secrets) seal(ctx context.Context, spec *events.JobSpec, keep bool) error {
	if spec == nil {
		return nil
	}
	if len(spec.SealedEnv) > 0 {
		return status.Error(codes.InvalidArgument, "sealed_env: set by the master only; give secret values in env with their names in secret_env")
	}
	if len(spec.SecretEnv) == 0 {
		return nil
	}
	secret := map[string]bool{}
	for _, n := range spec.SecretEnv {
		secret[n] = true
	}
	for _, i := range slices.Sorted(maps.Keys(spec.Overrides)) {
		for k := range spec.Overrides[i].GetEnv() {
			if secret[k] {
				return status.Errorf(codes.InvalidArgument, "overrides[%d].env[%s]: a secret's value goes in env, sealed for the whole job, not in an override", i, k)
			}
		}
	}
	user := userOf(ctx)
	var old map[string]string
	if keep && s.View != nil {
		var sealed []byte
		s.View(func(st *projections.State) {
			if j := st.Job(user, spec.Name); j != nil {
				sealed = j.Spec().GetSealedEnv()
			}
		})
		var err error
		if old, err = s.Sealer.Open(user, spec.Name, sealed); err != nil {
			return status.Errorf(codes.FailedPrecondition, "the job's current secrets: %v", err)
		}
	}
	values := map[string]string{}
	env := maps.Clone(spec.Env)
	for _, n := range spec.SecretEnv {
		v, given := env[n]
		delete(env, n)
		switch {
		case given && v != Redacted:
			values[n] = v
		case keep:
			if ov, ok := old[n]; ok {
				values[n] = ov
			}
		case given:
			return status.Errorf(codes.InvalidArgument, "env[%s]: %s stands for a value the job already has; a new job needs the value itself", n, Redacted)
		}
	}
	for i, n := range spec.SecretEnv {
		if _, ok := values[n]; !ok {
			return status.Errorf(codes.InvalidArgument, "secret_env[%d]: %s has no value: give it in env, or with `corral job submit --secret %s` from your environment", i, n, n)
		}
	}
	sealed, err := s.Sealer.Seal(user, spec.Name, values)
	if err != nil {
		return status.Errorf(codes.Internal, "sealing secret_env: %v", err)
	}
	spec.Env, spec.SealedEnv = env, sealed
	return nil
}

// RedactSpec returns spec with its sealed values dropped and each secret
// name shown in env as Redacted; spec itself is not changed.
func RedactSpec(spec *events.JobSpec) *events.JobSpec {
	if spec == nil || (len(spec.SecretEnv) == 0 && len(spec.SealedEnv) == 0) {
		return spec
	}
	c := proto.Clone(spec).(*events.JobSpec)
	c.SealedEnv = nil
	if c.Env == nil && len(c.SecretEnv) > 0 {
		c.Env = map[string]string{}
	}
	for _, n := range c.SecretEnv {
		c.Env[n] = Redacted
	}
	return c
}

var payloadJSON = protojson.MarshalOptions{UseProtoNames: true}

// redactEvent rewrites the payload JSON of an event carrying a spec.
func redactEvent(ev *apipb.EventView) {
	if ev == nil || !strings.Contains(ev.PayloadJson, "secret_env") && !strings.Contains(ev.PayloadJson, "sealed_env") {
		return
	}
	var p interface {
		proto.Message
		GetSpec() *events.JobSpec
	}
	switch ev.Type {
	case "JobSubmitted":
		p = &events.JobSubmitted{}
	case "JobUpdated":
		p = &events.JobUpdated{}
	default:
		return
	}
	if err := protojson.Unmarshal([]byte(ev.PayloadJson), p); err != nil {
		ev.PayloadJson = `{"error": "the payload could not be redacted"}`
		return
	}
	red := RedactSpec(p.GetSpec())
	switch m := p.(type) {
	case *events.JobSubmitted:
		m.Spec = red
	case *events.JobUpdated:
		m.Spec = red
	}
	if b, err := payloadJSON.Marshal(p); err == nil {
		ev.PayloadJson = string(b)
	}
}

// Redact redacts a reply of the Cell API in place: JobView, JobList,
// CellView, EventList and EventView (their specs are replaced, never
// changed: they are the projection's). The interceptors call it; an
// in-process caller of the Service (the web UI) calls it itself.
func Redact(reply any) { redact(reply) }

func redact(reply any) {
	switch r := reply.(type) {
	case *apipb.JobView:
		if r != nil {
			r.Spec = RedactSpec(r.Spec)
		}
	case *apipb.JobList:
		for _, j := range r.GetJobs() {
			j.Spec = RedactSpec(j.Spec)
		}
	case *apipb.CellView:
		for _, j := range r.GetJobs() {
			j.Spec = RedactSpec(j.Spec)
		}
	case *apipb.EventList:
		for _, e := range r.GetEvents() {
			redactEvent(e)
		}
	case *apipb.EventView:
		redactEvent(r)
	}
}

// Unary is the master's unary server interceptor: Submit and Update have
// their secrets sealed; replies are redacted.
func (s *Secrets) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		switch r := req.(type) {
		case *apipb.SubmitRequest:
			if err := s.seal(ctx, r.Spec, false); err != nil {
				return nil, err
			}
		case *apipb.UpdateRequest:
			if err := s.seal(ctx, r.Spec, true); err != nil {
				return nil, err
			}
		}
		reply, err := handler(ctx, req)
		if err == nil {
			redact(reply)
		}
		return reply, err
	}
}

// Stream is the master's stream server interceptor: watched events are
// redacted.
func (s *Secrets) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, redactingStream{ss})
	}
}

type redactingStream struct{ grpc.ServerStream }

func (r redactingStream) SendMsg(m any) error {
	redact(m)
	return r.ServerStream.SendMsg(m)
}

// UnsealPolls is the client interceptor of the link's connections to
// agents: each start or update a poll carries gets the job's secret values
// in its env. A start whose secrets do not open is left out of the poll
// (and logged): a task never runs without them.
func (s *Secrets) UnsealPolls() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if pr, ok := req.(*agentpb.PollRequest); ok && s.View != nil {
			req = s.unseal(pr)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

func (s *Secrets) unseal(pr *agentpb.PollRequest) *agentpb.PollRequest {
	type want struct {
		i       int
		ref     *events.TaskRef
		version int64
	}
	var wants []want
	for i, r := range pr.Requests {
		switch k := r.Kind.(type) {
		case *agentpb.Request_Start:
			wants = append(wants, want{i, k.Start.GetTask(), k.Start.GetSpecVersion()})
		case *agentpb.Request_Update:
			wants = append(wants, want{i, k.Update.GetTask(), k.Update.GetSpecVersion()})
		}
	}
	if len(wants) == 0 {
		return pr
	}
	sealed := make([][]byte, len(wants))
	s.View(func(st *projections.State) {
		for i, w := range wants {
			if j := st.Job(w.ref.GetUser(), w.ref.GetJob()); j != nil {
				sealed[i] = j.SpecOf(w.version).GetSealedEnv()
			}
		}
	})
	var out *agentpb.PollRequest
	drop := map[int]bool{}
	for i, w := range wants {
		if len(sealed[i]) == 0 {
			continue
		}
		env, err := s.Sealer.Open(w.ref.GetUser(), w.ref.GetJob(), sealed[i])
		if err != nil {
			s.log().Error("not starting a task whose secrets do not open", "task", fmt.Sprintf("%s/%s/%d", w.ref.GetUser(), w.ref.GetJob(), w.ref.GetIndex()), "err", err)
			drop[w.i] = true
			continue
		}
		if out == nil {
			out = proto.Clone(pr).(*agentpb.PollRequest)
		}
		var spec *agentpb.TaskSpec
		switch k := out.Requests[w.i].Kind.(type) {
		case *agentpb.Request_Start:
			spec = k.Start.GetSpec()
		case *agentpb.Request_Update:
			spec = k.Update.GetSpec()
		}
		if spec == nil {
			continue
		}
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		maps.Copy(spec.Env, env)
	}
	if len(drop) > 0 {
		if out == nil {
			out = proto.Clone(pr).(*agentpb.PollRequest)
		}
		kept := out.Requests[:0]
		for i, r := range out.Requests {
			if !drop[i] {
				kept = append(kept, r)
			}
		}
		out.Requests = kept
	}
	if out == nil {
		return pr
	}
	return out
}
