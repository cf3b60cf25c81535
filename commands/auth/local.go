package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Local is what `corral up` needs to run a whole cell on one machine with
// every connection authenticated: the cell directory, the credentials of
// its master and agents, and the local person's admin certificate and
// token, so the newcomer's path needs no step of its own.
type Local struct {
	Cell   *Cell
	Master *Credentials
	Agents map[string]*Credentials // by machine name
	// Admin's files: certificate, key and token (a file holding the
	// token; the cell stores only its hash).
	Admin                               string
	AdminCert, AdminKey, AdminToken, CA string
	Tokens                              *Tokens
	Sealer                              *Sealer
}

// SetUpLocal creates (or reuses) the cell directory dir for cell with a
// master certificate for master, agent certificates for agents, and an
// admin certificate and token for admin. Existing certificates are kept
// unless they expire within 30 days; an existing token file is kept while
// the cell still knows its token.
func SetUpLocal(dir, cell, master, admin string, agents ...string) (*Local, error) {
	c, err := Init(dir, cell)
	if err != nil {
		return nil, err
	}
	l := &Local{Cell: c, Agents: map[string]*Credentials{}, Admin: admin, CA: filepath.Join(dir, CAFile), Tokens: c.Tokens()}
	if l.Master, err = ensure(c, RoleMaster, master); err != nil {
		return nil, err
	}
	for _, a := range agents {
		if l.Agents[a], err = ensure(c, RoleAgent, a); err != nil {
			return nil, err
		}
	}
	if _, err = ensure(c, RoleAdmin, admin); err != nil {
		return nil, err
	}
	l.AdminCert, l.AdminKey = c.CertPath(RoleAdmin, admin), c.KeyPath(RoleAdmin, admin)
	l.AdminToken = filepath.Join(dir, "admins", admin+".token")
	tok, err := ReadToken(l.AdminToken)
	if err == nil {
		if id, lerr := l.Tokens.Lookup(tok); lerr != nil || id.Name != admin || id.Role != RoleAdmin {
			err = errors.New("unknown")
		}
	}
	if err != nil {
		if tok, err = l.Tokens.Issue(admin, RoleAdmin); err != nil {
			return nil, err
		}
		if err := writeFile(l.AdminToken, []byte(tok+"\n")); err != nil {
			return nil, err
		}
	}
	if l.Sealer, err = c.Sealer(); err != nil {
		return nil, err
	}
	return l, nil
}

// ensure loads role's name's credentials, issuing them when missing, not
// from this CA, or expiring within renewBefore.
func ensure(c *Cell, role Role, name string) (*Credentials, error) {
	cr, err := c.Credentials(role, name)
	if err == nil && time.Until(leafOf(cr).NotAfter) > renewBefore {
		return cr, nil
	}
	if _, _, err := c.Issue(role, name); err != nil {
		return nil, err
	}
	return c.Credentials(role, name)
}

func leafOf(cr *Credentials) *x509.Certificate {
	if cr.cert.Leaf != nil {
		return cr.cert.Leaf
	}
	l, _ := x509.ParseCertificate(cr.cert.Certificate[0])
	return l
}

// LocalClient returns the client options SetUpLocal (corral up) left for
// user in the cell directory dir: the CA, user's admin certificate and key,
// and the token beside them when there is one.
func LocalClient(dir, user string) (ClientOptions, error) {
	c := &Cell{Dir: dir}
	o := ClientOptions{CAFile: filepath.Join(dir, CAFile)}
	for _, role := range []Role{RoleAdmin, RoleUser} {
		if _, err := os.Stat(c.CertPath(role, user)); err == nil {
			o.CertFile, o.KeyFile = c.CertPath(role, user), c.KeyPath(role, user)
			break
		}
	}
	if tok, err := ReadToken(filepath.Join(dir, "admins", user+".token")); err == nil {
		o.Token = tok
	}
	if o.CertFile == "" && o.Token == "" {
		return o, fmt.Errorf("no credentials for %s in %s: run corral up, or have an admin issue you a certificate", user, dir)
	}
	if _, err := os.Stat(o.CAFile); err != nil {
		return o, fmt.Errorf("cell CA: %w", err)
	}
	return o, nil
}
