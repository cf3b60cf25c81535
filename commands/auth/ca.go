package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Files of a cell directory.
const (
	CAFile      = "ca.crt"
	caKeyFile   = "ca.key"
	cellFile    = "cell"
	SecretsFile = "secrets.key"
	TokensFile  = "tokens"
)

// Validity of what Init and Issue create.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore: Local reissues a certificate that expires sooner.
	renewBefore = 30 * 24 * time.Hour
)

var cellRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Cell is a cell's directory of credentials, opened with its CA's key: what
// issues certificates and tokens.
type Cell struct {
	Dir  string
	Name string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Init creates the cell directory dir for cell, or opens it if it exists:
// the CA (ECDSA P-256, valid 10 years), the secrets key and an empty tokens
// file. It refuses a directory made for another cell. Certificates are made
// by Issue (or Local, for corral up).
func Init(dir, cell string) (*Cell, error) {
	if !cellRE.MatchString(cell) {
		return nil, fmt.Errorf("cell %q: want a DNS label (lowercase letters, digits and '-')", cell)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cell directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cell directory: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, cellFile)); err == nil {
		if got := strings.TrimSpace(string(b)); got != cell {
			return nil, fmt.Errorf("cell directory %s belongs to cell %q, not %q", dir, got, cell)
		}
		return Open(dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "corral cell " + cell + " CA", Organization: []string{"corral"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating the cell CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	// The cell file goes last: its presence means the directory is whole.
	for _, f := range []struct {
		name string
		data []byte
	}{
		{CAFile, certPEM(der)},
		{caKeyFile, keyPEM},
		{SecretsFile, secret},
		{TokensFile, nil},
		{cellFile, []byte(cell + "\n")},
	} {
		if err := writeFile(filepath.Join(dir, f.name), f.data); err != nil {
			return nil, err
		}
	}
	return &Cell{Dir: dir, Name: cell, ca: ca, key: key}, nil
}

// Open opens an existing cell directory with its CA's key.
func Open(dir string) (*Cell, error) {
	b, err := os.ReadFile(filepath.Join(dir, cellFile))
	if err != nil {
		return nil, fmt.Errorf("%s is not a cell directory (run `corral certs init`): %w", dir, err)
	}
	cell := strings.TrimSpace(string(b))
	ca, err := readCert(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	key, err := readKey(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, err
	}
	if !key.PublicKey.Equal(ca.PublicKey) {
		return nil, fmt.Errorf("%s does not belong to %s", filepath.Join(dir, caKeyFile), filepath.Join(dir, CAFile))
	}
	return &Cell{Dir: dir, Name: cell, ca: ca, key: key}, nil
}

// CA returns the cell's CA certificate.
func (c *Cell) CA() *x509.Certificate { return c.ca }

// CertPath and KeyPath are where Issue writes the certificate and key of a
// role's name: <dir>/<role>s/<name>.crt and .key.
func (c *Cell) CertPath(role Role, name string) string {
	return filepath.Join(c.Dir, string(role)+"s", name+".crt")
}

func (c *Cell) KeyPath(role Role, name string) string {
	return filepath.Join(c.Dir, string(role)+"s", name+".key")
}

// Issue makes a certificate for name in role, valid a year, and writes it
// with its key (both 0600). Masters and agents are servers as well as
// clients: hosts (DNS names or IP addresses) become SANs, with localhost,
// 127.0.0.1 and ::1 always added.
func (c *Cell) Issue(role Role, name string, hosts ...string) (certFile, keyFile string, err error) {
	if !role.Valid() {
		return "", "", fmt.Errorf("role %q: want master, agent, user or admin", role)
	}
	if err := checkName("name", name); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, OrganizationalUnit: []string{ouPrefix + string(role)}, Organization: []string{"corral cell " + c.Name}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{identityURI(c.Name, role, name)},
	}
	if role == RoleMaster || role == RoleAgent {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		seen := map[string]bool{}
		for _, h := range append([]string{"localhost", "127.0.0.1", "::1"}, hosts...) {
			if h == "" || seen[h] {
				continue
			}
			seen[h] = true
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.key)
	if err != nil {
		return "", "", fmt.Errorf("issuing %s %s: %w", role, name, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = c.CertPath(role, name), c.KeyPath(role, name)
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return "", "", err
	}
	if err := writeFile(keyFile, kp); err != nil {
		return "", "", err
	}
	if err := writeFile(certFile, certPEM(der)); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// Credentials loads the credentials Issue wrote for role's name.
func (c *Cell) Credentials(role Role, name string) (*Credentials, error) {
	return LoadCredentials(filepath.Join(c.Dir, CAFile), c.CertPath(role, name), c.KeyPath(role, name))
}

// Sealer returns the sealer of the cell's secrets key.
func (c *Cell) Sealer() (*Sealer, error) { return LoadSealer(filepath.Join(c.Dir, SecretsFile)) }

// Tokens returns the cell's token store.
func (c *Cell) Tokens() *Tokens { return NewTokens(filepath.Join(c.Dir, TokensFile)) }

// ---- files -------------------------------------------------------------------

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writeFile writes data to path with mode 0600, through a temporary file
// renamed into place, so a reader never sees half a key.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: not a PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || !bytes.HasSuffix([]byte(blk.Type), []byte("PRIVATE KEY")) {
		return nil, fmt.Errorf("%s: not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return ek, nil
}
