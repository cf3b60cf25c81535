package auth

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Role is what an identity is for.
type Role string

const (
	RoleMaster Role = "master" // polls agents, serves the API
	RoleAgent  Role = "agent"  // one machine's agent: registers, is polled
	RoleUser   Role = "user"   // submits and changes their own jobs
	RoleAdmin  Role = "admin"  // a user with the admin capability (Borg §2.5)
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleMaster, RoleAgent, RoleUser, RoleAdmin:
		return true
	}
	return false
}

// Person reports whether r is a user's role (user or admin).
func (r Role) Person() bool { return r == RoleUser || r == RoleAdmin }

// ouPrefix marks the OU that carries the role.
const ouPrefix = "corral-"

// Identity is an authenticated caller.
type Identity struct {
	Name string
	Role Role
	// Via is how it was established: "certificate" or "token".
	Via string
}

func (id Identity) String() string { return fmt.Sprintf("%s %s (by %s)", id.Role, id.Name, id.Via) }

type identityKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity an Authenticator put in ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// nameRE is what a name in a certificate or token may be: a corral user
// name, or a machine or master name.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkName(field, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%s %q: want 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", field, name)
	}
	return nil
}

// identityURI is the SAN URI that binds a certificate to a cell and role.
func identityURI(cell string, role Role, name string) *url.URL {
	return &url.URL{Scheme: "corral", Host: cell, Path: "/" + string(role) + "/" + name}
}

// IdentityOf reads the identity a verified certificate of cell names. The
// certificate must carry the SAN URI corral://<cell>/<role>/<name>, whose
// role and name agree with its OU and CN.
func IdentityOf(cell string, cert *x509.Certificate) (Identity, error) {
	for _, u := range cert.URIs {
		if u.Scheme != "corral" {
			continue
		}
		if u.Host != cell {
			return Identity{}, fmt.Errorf("certificate %q is for cell %q, not %q", cert.Subject.CommonName, u.Host, cell)
		}
		role, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		if !ok || !Role(role).Valid() {
			return Identity{}, fmt.Errorf("certificate %q: SAN URI %s names no corral role", cert.Subject.CommonName, u)
		}
		if name != cert.Subject.CommonName {
			return Identity{}, fmt.Errorf("certificate %q: SAN URI names %q", cert.Subject.CommonName, name)
		}
		if len(cert.Subject.OrganizationalUnit) != 1 || cert.Subject.OrganizationalUnit[0] != ouPrefix+role {
			return Identity{}, fmt.Errorf("certificate %q: OU %v does not match role %s", name, cert.Subject.OrganizationalUnit, role)
		}
		if err := checkName("certificate CN", name); err != nil {
			return Identity{}, err
		}
		return Identity{Name: name, Role: Role(role), Via: "certificate"}, nil
	}
	return Identity{}, fmt.Errorf("certificate %q names no corral identity (no corral:// SAN URI)", cert.Subject.CommonName)
}
