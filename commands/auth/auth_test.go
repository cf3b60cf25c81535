package auth

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/events"
)

func TestInitWritesPrivateFilesAndIsIdempotent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cell")
	c, err := Init(dir, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Issue(RoleMaster, "master1", "10.0.0.5", "master1.example"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Issue(RoleUser, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tokens().Issue("alice", RoleUser); err != nil {
		t.Fatal(err)
	}
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Init(dir, "prod")
	if err != nil || !again.CA().Equal(c.CA()) {
		t.Errorf("Init again made a new CA: %v", err)
	}
	if _, err := Init(dir, "staging"); err == nil || !strings.Contains(err.Error(), `belongs to cell "prod"`) {
		t.Errorf("Init of another cell on the same dir: %v", err)
	}
	if _, err := Init(t.TempDir(), "Not_A_Label"); err == nil {
		t.Error("a cell name that is no DNS label was accepted")
	}

	cr, err := c.Credentials(RoleMaster, "master1")
	if err != nil {
		t.Fatal(err)
	}
	if cr.Identity != (Identity{Name: "master1", Role: RoleMaster, Via: "certificate"}) || cr.Cell != "prod" {
		t.Errorf("credentials %+v of cell %q", cr.Identity, cr.Cell)
	}
	leaf := leafOf(cr)
	if leaf.PublicKeyAlgorithm != x509.ECDSA || leaf.VerifyHostname("10.0.0.5") != nil || leaf.VerifyHostname("127.0.0.1") != nil ||
		leaf.VerifyHostname("localhost") != nil || leaf.VerifyHostname("master1.example") != nil {
		t.Errorf("master certificate SANs: %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	// A certificate of another cell's CA does not load with this CA.
	other, _ := Init(filepath.Join(t.TempDir(), "o"), "other")
	ocert, okey, _ := other.Issue(RoleAdmin, "mallory")
	if _, err := LoadCredentials(filepath.Join(dir, CAFile), ocert, okey); err == nil || !strings.Contains(err.Error(), "not from the CA") {
		t.Errorf("another cell's certificate: %v", err)
	}
}

func TestIdentityOfNeedsTheCellAndAConsistentRole(t *testing.T) {
	c, err := Init(t.TempDir(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	cert, _, _ := c.Issue(RoleAdmin, "ada")
	leaf, err := readCert(cert)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := IdentityOf("prod", leaf); err != nil || id.Role != RoleAdmin || id.Name != "ada" {
		t.Errorf("IdentityOf: %v %v", id, err)
	}
	if _, err := IdentityOf("staging", leaf); err == nil || !strings.Contains(err.Error(), `is for cell "prod"`) {
		t.Errorf("another cell: %v", err)
	}
	forged := *leaf
	forged.Subject.OrganizationalUnit = []string{"corral-user"}
	if _, err := IdentityOf("prod", &forged); err == nil {
		t.Error("an OU disagreeing with the SAN URI was accepted")
	}
	forged = *leaf
	forged.URIs = nil
	if _, err := IdentityOf("prod", &forged); err == nil {
		t.Error("a certificate without the corral SAN URI was accepted")
	}
}

func TestTokensAreStoredHashedAndRevocable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	ts := NewTokens(path)
	tok, err := ts.Issue("alice", RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := ts.Issue("ada", RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if bytes.Contains(b, []byte(tok)) || bytes.Contains(b, []byte(strings.TrimPrefix(tok, TokenPrefix))) || !bytes.HasPrefix(b, []byte("sha256:")) {
		t.Errorf("the tokens file holds more than hashes:\n%s", b)
	}
	if id, err := ts.Lookup(tok); err != nil || id != (Identity{Name: "alice", Role: RoleUser, Via: "token"}) {
		t.Errorf("Lookup: %v %v", id, err)
	}
	if id, err := ts.Lookup(adm); err != nil || id.Role != RoleAdmin {
		t.Errorf("Lookup admin: %v %v", id, err)
	}
	for _, bad := range []string{"", tok + "x", tok[:len(tok)-1], strings.ToUpper(tok)} {
		if _, err := ts.Lookup(bad); err == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
	if _, err := ts.Issue("bob", RoleAgent); err == nil {
		t.Error("a token for an agent was issued")
	}
	if n, err := ts.Revoke("alice"); n != 1 || err != nil {
		t.Fatalf("Revoke: %d %v", n, err)
	}
	if _, err := NewTokens(path).Lookup(tok); err == nil {
		t.Error("a revoked token still works")
	}
	if _, err := NewTokens(path).Lookup(adm); err != nil {
		t.Errorf("revoking alice revoked ada: %v", err)
	}
	// A tokens file others can read is refused, not trusted.
	os.Chmod(path, 0o644)
	if _, err := NewTokens(path).Lookup(adm); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable tokens file: %v", err)
	}
}

func TestSealerBindsSecretsToTheirJob(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"API_KEY": "k1", "DB_PASSWORD": "p2"}
	a, err := s.Seal("alice", "web", env)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Seal("alice", "web", map[string]string{"DB_PASSWORD": "p2", "API_KEY": "k1"})
	if !bytes.Equal(a, b) {
		t.Error("the same secrets of the same job sealed differently: resubmitting would change the spec")
	}
	if c, _ := s.Seal("alice", "api", env); bytes.Equal(a, c) {
		t.Error("two jobs' seals are equal")
	}
	if d, _ := s.Seal("alice", "web", map[string]string{"API_KEY": "k2", "DB_PASSWORD": "p2"}); bytes.Equal(a[:13], d[:13]) {
		t.Error("a nonce was reused for different secrets")
	}
	if bytes.Contains(a, []byte("k1")) || bytes.Contains(a, []byte("p2")) {
		t.Error("plaintext in the sealed bytes")
	}
	got, err := s.Open("alice", "web", a)
	if err != nil || got["API_KEY"] != "k1" || got["DB_PASSWORD"] != "p2" {
		t.Errorf("Open: %v %v", got, err)
	}
	for name, open := range map[string]func() error{
		"another job":  func() error { _, err := s.Open("alice", "api", a); return err },
		"another user": func() error { _, err := s.Open("bob", "web", a); return err },
		"another key": func() error {
			o, _ := NewSealer(bytes.Repeat([]byte{8}, 32))
			_, err := o.Open("alice", "web", a)
			return err
		},
		"a flipped bit": func() error {
			c := bytes.Clone(a)
			c[len(c)-1] ^= 1
			_, err := s.Open("alice", "web", c)
			return err
		},
		"a truncated blob": func() error { _, err := s.Open("alice", "web", a[:10]); return err },
	} {
		if open() == nil {
			t.Errorf("sealed secrets opened with %s", name)
		}
	}
	if _, err := NewSealer(key[:16]); err == nil {
		t.Error("a 16-byte key was accepted")
	}
}

func TestRedactSpecLeavesTheOriginal(t *testing.T) {
	sp := &events.JobSpec{Name: "web", Env: map[string]string{"A": "1"}, SecretEnv: []string{"K"}, SealedEnv: []byte{1, 2, 3}}
	r := RedactSpec(sp)
	if r.Env["K"] != Redacted || r.Env["A"] != "1" || r.SealedEnv != nil {
		t.Errorf("redacted %v", r)
	}
	if _, ok := sp.Env["K"]; ok || sp.SealedEnv == nil {
		t.Errorf("the original changed: %v", sp)
	}
	plain := &events.JobSpec{Name: "x"}
	if RedactSpec(plain) != plain {
		t.Error("a spec without secrets was copied")
	}
}

func TestLimiterBucketsPerCaller(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Rate: 10, Burst: 5, Now: func() time.Time { return now }}
	for i := 0; i < 5; i++ {
		if ok, _ := l.Allow("alice"); !ok {
			t.Fatalf("request %d of a burst of 5 refused", i)
		}
	}
	ok, wait := l.Allow("alice")
	if ok || wait != 100*time.Millisecond {
		t.Errorf("the 6th: %v, retry in %v", ok, wait)
	}
	if ok, _ := l.Allow("bob"); !ok {
		t.Error("alice's burst took bob's bucket")
	}
	now = now.Add(250 * time.Millisecond)
	n := 0
	for {
		if ok, _ := l.Allow("alice"); !ok {
			break
		}
		n++
	}
	if n != 2 {
		t.Errorf("after 250 ms at 10/s, %d requests admitted, want 2", n)
	}
	// Many callers: idle full buckets are forgotten, memory stays bounded.
	for i := 0; i < maxIdleBuckets+10; i++ {
		now = now.Add(time.Second)
		l.Allow(fmt.Sprint("u", i))
	}
	if len(l.buckets) > maxIdleBuckets {
		t.Errorf("%d buckets kept", len(l.buckets))
	}
}

func TestLimiterConcurrentUse(t *testing.T) {
	l := &Limiter{Rate: 1e6, Burst: 100}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				l.Allow(fmt.Sprint("u", j%10))
			}
		}()
	}
	wg.Wait()
}

func TestSetUpLocalIsIdempotent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	l, err := SetUpLocal(dir, "dev", "master", "alice", "m0", "m1")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := ReadToken(l.AdminToken)
	cert, _ := os.ReadFile(l.AdminCert)
	again, err := SetUpLocal(dir, "dev", "master", "alice", "m0", "m1", "m2")
	if err != nil {
		t.Fatal(err)
	}
	tok2, _ := ReadToken(again.AdminToken)
	cert2, _ := os.ReadFile(again.AdminCert)
	if tok != tok2 || !bytes.Equal(cert, cert2) || len(again.Agents) != 3 {
		t.Errorf("a second corral up changed the admin's credentials or lost agents: %v", again.Agents)
	}
	if id, err := again.Tokens.Lookup(tok); err != nil || id.Role != RoleAdmin || id.Name != "alice" {
		t.Errorf("the admin token: %v %v", id, err)
	}
	o, err := LocalClient(dir, "alice")
	if err != nil || o.CertFile != l.AdminCert || o.Token != tok {
		t.Fatalf("LocalClient: %+v %v", o, err)
	}
	if _, err := o.DialOptions(); err != nil {
		t.Error(err)
	}
	if _, err := LocalClient(dir, "bob"); err == nil || !strings.Contains(err.Error(), "no credentials for bob") {
		t.Errorf("LocalClient for someone else: %v", err)
	}
}
