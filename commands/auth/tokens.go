package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// TokenPrefix starts every token, so one is recognised in a leaked file.
const TokenPrefix = "corral_"

// Tokens is the cell's bearer tokens, as a file of one line per token:
// "sha256:<hex of the token's hash> <role> <name> <issued, RFC 3339>". The
// file holds no token itself. It is read again when it changes, so tokens
// issued or revoked reach a running master within a second, streams
// opened with a revoked token included.
type Tokens struct {
	path string

	mu      sync.Mutex
	checked time.Time // when the file's stat was last looked at
	modTime time.Time
	size    int64
	entries []tokenEntry
	err     error
}

type tokenEntry struct {
	hash [sha256.Size]byte
	id   Identity
}

// NewTokens returns the token store of the file at path (which need not
// exist yet).
func NewTokens(path string) *Tokens { return &Tokens{path: path} }

// Issue creates a token for name in role (user or admin), records its hash
// and returns the token: the only time it is seen.
func (t *Tokens) Issue(name string, role Role) (string, error) {
	if !role.Person() {
		return "", fmt.Errorf("role %q: tokens are for people: user or admin", role)
	}
	if err := checkName("name", name); err != nil {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	h := sha256.Sum256([]byte(tok))
	line := fmt.Sprintf("sha256:%s %s %s %s\n", hex.EncodeToString(h[:]), role, name, time.Now().UTC().Format(time.RFC3339))
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.OpenFile(t.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return "", fmt.Errorf("tokens file: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return "", fmt.Errorf("tokens file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	t.checked = time.Time{} // read it again on the next lookup
	return tok, nil
}

// Revoke removes every token of name and returns how many there were.
func (t *Tokens) Revoke(name string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, err := os.ReadFile(t.path)
	if err != nil {
		return 0, err
	}
	var keep bytes.Buffer
	n := 0
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == name {
			n++
			continue
		}
		keep.WriteString(line)
	}
	if err := writeFile(t.path, keep.Bytes()); err != nil {
		return 0, err
	}
	t.checked = time.Time{}
	return n, nil
}

// Lookup returns the identity of a presented token. Every stored hash is
// compared, in constant time, whatever matches first.
func (t *Tokens) Lookup(token string) (Identity, error) {
	entries, err := t.load()
	if err != nil {
		return Identity{}, err
	}
	h := sha256.Sum256([]byte(token))
	var found Identity
	match := 0
	for i := range entries {
		eq := subtle.ConstantTimeCompare(h[:], entries[i].hash[:])
		if eq == 1 && match == 0 {
			found = entries[i].id
		}
		match |= eq
	}
	if match == 0 {
		return Identity{}, errors.New("the token is not known to this cell (revoked, or from another cell)")
	}
	return found, nil
}

// tokenReread is how often the token file's stat is looked at: a token
// issued or revoked by another process is seen within it.
const tokenReread = 250 * time.Millisecond

// load returns the entries, reading the file again when its size or time
// changed (looked at most every tokenReread).
func (t *Tokens) load() ([]tokenEntry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if now.Sub(t.checked) < tokenReread && !t.checked.IsZero() {
		return t.entries, t.err
	}
	t.checked = now
	st, err := os.Stat(t.path)
	if errors.Is(err, os.ErrNotExist) {
		t.entries, t.err = nil, nil
		return nil, nil
	}
	if err != nil {
		t.err = fmt.Errorf("tokens file: %w", err)
		return nil, t.err
	}
	if st.ModTime().Equal(t.modTime) && st.Size() == t.size && t.err == nil {
		return t.entries, nil
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.err = fmt.Errorf("tokens file %s: mode %v lets others read it; chmod 600", t.path, st.Mode().Perm())
		return nil, t.err
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		t.err = fmt.Errorf("tokens file: %w", err)
		return nil, t.err
	}
	var entries []tokenEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "sha256:") {
			t.err = fmt.Errorf("tokens file %s:%d: want \"sha256:<hex> <role> <name> [issued]\"", t.path, n)
			return nil, t.err
		}
		raw, err := hex.DecodeString(strings.TrimPrefix(f[0], "sha256:"))
		if err != nil || len(raw) != sha256.Size {
			t.err = fmt.Errorf("tokens file %s:%d: the hash is not 64 hex digits", t.path, n)
			return nil, t.err
		}
		role := Role(f[1])
		if !role.Person() {
			t.err = fmt.Errorf("tokens file %s:%d: role %q: want user or admin", t.path, n, f[1])
			return nil, t.err
		}
		if err := checkName("name", f[2]); err != nil {
			t.err = fmt.Errorf("tokens file %s:%d: %v", t.path, n, err)
			return nil, t.err
		}
		var e tokenEntry
		copy(e.hash[:], raw)
		e.id = Identity{Name: f[2], Role: role, Via: "token"}
		entries = append(entries, e)
	}
	t.entries, t.err, t.modTime, t.size = entries, nil, st.ModTime(), st.Size()
	return entries, nil
}

// Bearer is a token as gRPC per-RPC credentials: the header
// "authorization: Bearer <token>", sent only over TLS.
type Bearer string

func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (Bearer) RequireTransportSecurity() bool { return true }

var _ credentials.PerRPCCredentials = Bearer("")
