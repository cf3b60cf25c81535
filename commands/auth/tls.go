package auth

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Credentials are one process's certificate and key with the cell's CA: what
// it serves with and dials with.
type Credentials struct {
	Cell string
	// CAID tells the CA from any other: the first 8 bytes of the SHA-256
	// of its certificate, in hex. It is not the cell's identity: two cells
	// made from one copied certs directory share it.
	CAID     string
	Identity Identity
	cert     tls.Certificate
	roots    *x509.CertPool
}

// LoadCredentials reads a CA certificate and a certificate with its key.
// The certificate must chain to the CA and name a corral identity.
func LoadCredentials(caFile, certFile, keyFile string) (*Credentials, error) {
	ca, err := readCert(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate %s with key %s: %w", certFile, keyFile, err)
	}
	leaf := kp.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(kp.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certificate %s: %w", certFile, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("certificate %s is not from the CA %s: %w", certFile, caFile, err)
	}
	cell := cellOfCA(ca)
	id, err := IdentityOf(cell, leaf)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", certFile, err)
	}
	return &Credentials{Cell: cell, CAID: caID(ca), Identity: id, cert: kp, roots: roots}, nil
}

// caID is Credentials.CAID of ca.
func caID(ca *x509.Certificate) string {
	sum := sha256.Sum256(ca.Raw)
	return hex.EncodeToString(sum[:8])
}

// cellOfCA reads the cell's name from its CA's common name.
func cellOfCA(ca *x509.Certificate) string {
	return strings.TrimSuffix(strings.TrimPrefix(ca.Subject.CommonName, "corral cell "), " CA")
}

// Roots returns a pool holding the cell's CA.
func (c *Credentials) Roots() *x509.CertPool { return c.roots }

// ServerTLS is the TLS config of a server of the cell. With
// requireClientCert (the agent's server) a client without a certificate
// from the cell's CA fails the handshake; otherwise (the master's, which
// people may reach with a token) a certificate is verified if given and
// the Authenticator decides.
func (c *Credentials) ServerTLS(requireClientCert bool) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if requireClientCert {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		Certificates: []tls.Certificate{c.cert},
		ClientCAs:    c.roots,
		ClientAuth:   auth,
		MinVersion:   tls.VersionTLS13,
	}
}

// ServerOption is grpc.Creds of ServerTLS.
func (c *Credentials) ServerOption(requireClientCert bool) grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(c.ServerTLS(requireClientCert)))
}

// ClientTLS is the TLS config for dialing a server of the cell that must
// hold a certificate of one of the roles given (any role when none is).
func (c *Credentials) ClientTLS(server ...Role) *tls.Config {
	return clientTLS(c.Cell, c.roots, []tls.Certificate{c.cert}, server)
}

// DialOption is grpc.WithTransportCredentials of ClientTLS.
func (c *Credentials) DialOption(server ...Role) grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(c.ClientTLS(server...)))
}

func clientTLS(cell string, roots *x509.CertPool, certs []tls.Certificate, server []Role) *tls.Config {
	return &tls.Config{
		Certificates: certs,
		RootCAs:      roots,
		MinVersion:   tls.VersionTLS13,
		// The chain and host name are verified by crypto/tls first; this
		// adds the peer's role.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			id, err := IdentityOf(cell, cs.PeerCertificates[0])
			if err != nil {
				return err
			}
			if len(server) == 0 {
				return nil
			}
			for _, r := range server {
				if id.Role == r {
					return nil
				}
			}
			return fmt.Errorf("the server is %s, not a %s of cell %s", id, joinRoles(server), cell)
		},
	}
}

func joinRoles(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}

// ClientOptions are what a person's client (the corral command) dials the
// master with: the cell's CA, and a certificate or a token (or both).
type ClientOptions struct {
	CAFile            string
	CertFile, KeyFile string // a user's or admin's certificate; optional with Token
	Token             string // a bearer token; optional with a certificate
}

// DialOptions returns the gRPC options of o. The server must be a master.
func (o ClientOptions) DialOptions() ([]grpc.DialOption, error) {
	ca, err := readCert(o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	var certs []tls.Certificate
	if o.CertFile != "" {
		kp, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("certificate %s with key %s: %w", o.CertFile, o.KeyFile, err)
		}
		certs = append(certs, kp)
	}
	if len(certs) == 0 && o.Token == "" {
		return nil, errors.New("client credentials: give a certificate or a token")
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(cellOfCA(ca), roots, certs, []Role{RoleMaster})))}
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(Bearer(o.Token)))
	}
	return opts, nil
}

// ReadToken reads a token file (as Local writes them), trimmed.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
