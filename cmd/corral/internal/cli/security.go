package cli

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/commands/auth"
)

// masterAuth is how a master serves: with Credentials, TLS for everyone,
// mutual TLS for agents and tokens for people; nil Credentials is insecure
// mode (plaintext, the x-corral-user header trusted).
type masterAuth struct {
	creds  *auth.Credentials
	tokens *auth.Tokens
	sealer *auth.Sealer // nil: specs giving secret values are refused
}

// apiLimiter is what a master allows each caller: 200 requests a second
// sustained, bursts of 100, and 256 calls in flight in all.
func apiLimiter() *auth.Limiter {
	return &auth.Limiter{Rate: 200, Burst: 100, MaxInFlight: 256}
}

// serverOptions are the master's gRPC options for ma (nil: insecure) and
// the link's dial with the secrets that open sealed values for agents.
func (ma *masterAuth) serverOptions(log *slog.Logger) ([]grpc.ServerOption, *auth.Secrets, func(string) (*agent.Client, error)) {
	if ma == nil || ma.creds == nil {
		return auth.Server{Limiter: apiLimiter(), Logger: log}.Options(), nil, nil
	}
	var secrets *auth.Secrets
	if ma.sealer != nil {
		secrets = &auth.Secrets{Sealer: ma.sealer, Logger: log}
	}
	opts := auth.Server{Credentials: ma.creds, Tokens: ma.tokens, Limiter: apiLimiter(), Secrets: secrets, Logger: log}.Options()
	return opts, secrets, auth.LinkDial(ma.creds, secrets)
}

// loadMasterAuth reads a master's credentials from a cell directory: the
// CA, masters/<name>.crt and .key, the tokens file and the secrets key.
// Only the CA's certificate is needed, not its key.
func loadMasterAuth(dir, name string) (*masterAuth, error) {
	cr, err := auth.LoadCredentials(filepath.Join(dir, auth.CAFile),
		filepath.Join(dir, "masters", name+".crt"), filepath.Join(dir, "masters", name+".key"))
	if err != nil {
		return nil, fmt.Errorf("--certs %s: %w (issue one with `corral certs issue --role master %s`)", dir, err, name)
	}
	if cr.Identity.Role != auth.RoleMaster {
		return nil, fmt.Errorf("--certs %s: the certificate of %s is a %s's, not a master's", dir, name, cr.Identity.Role)
	}
	ma := &masterAuth{creds: cr, tokens: auth.NewTokens(filepath.Join(dir, auth.TokensFile))}
	if _, err := os.Stat(filepath.Join(dir, auth.SecretsFile)); err == nil {
		if ma.sealer, err = auth.LoadSealer(filepath.Join(dir, auth.SecretsFile)); err != nil {
			return nil, fmt.Errorf("--certs %s: %w", dir, err)
		}
	}
	return ma, nil
}

// loadAgentCredentials reads an agent's credentials from a cell directory:
// the CA and agents/<machine>.crt and .key.
func loadAgentCredentials(dir, machine string) (*auth.Credentials, error) {
	cr, err := auth.LoadCredentials(filepath.Join(dir, auth.CAFile),
		filepath.Join(dir, "agents", machine+".crt"), filepath.Join(dir, "agents", machine+".key"))
	if err != nil {
		return nil, fmt.Errorf("--certs %s: %w (issue one with `corral certs issue --role agent %s`)", dir, err, machine)
	}
	if cr.Identity.Role != auth.RoleAgent || cr.Identity.Name != machine {
		return nil, fmt.Errorf("--certs %s: the certificate names %s %s, not agent %s", dir, cr.Identity.Role, cr.Identity.Name, machine)
	}
	return cr, nil
}

// secureAgent gives cfg its certificate's options: mutual TLS, polls only
// from the cell's masters.
func secureAgent(cfg *agent.Config, cr *auth.Credentials, log *slog.Logger) {
	cfg.ServerOptions = auth.AgentServerOptions(cr, log)
	cfg.MasterDialOptions = auth.AgentDialOptions(cr)
	cfg.Cell = cr.Cell
}

// CellIDFile is the file, in a cell's data directory (`corral up`) or an
// agent's (`corral agent`), holding the id that names the cell's
// containers on a machine (agent.Config.CellID).
const CellIDFile = "cell-id"

// cellID is the id stored in dir/CellIDFile, minted on first use: 8
// random bytes in hex. It belongs to the data directory, not to the
// certificates, so two cells made from one copied certs directory (one CA,
// one cell name) still never share a cgroup parent, and never sweep each
// other's tasks. A directory that already holds an agent's state from
// before ids were minted (hadState) keeps the id it named its containers
// by (legacy), so the agent re-adopts them.
func cellID(dir string, hadState bool, legacy string) (string, error) {
	file := filepath.Join(dir, CellIDFile)
	b, err := os.ReadFile(file)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !agent.ValidCellPart(id) {
			return "", fmt.Errorf("%s holds %q, not a cell id (a letter or digit, then up to 62 letters, digits, '.', '_' or '-'): remove it to mint a new one", file, id)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("the cell id: %w", err)
	}
	id := legacy
	if !hadState || id == "" {
		var r [8]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", err
		}
		id = hex.EncodeToString(r[:])
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the cell id: %w", err)
	}
	// Written whole then renamed: a crash never leaves half an id.
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("the cell id: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return "", fmt.Errorf("the cell id: %w", err)
	}
	return id, nil
}

// pathHash is the id an agent with no certificates named its containers
// by before ids were minted: its data directory's path, hashed.
func pathHash(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:8])
}

// parseUIDRange reads FIRST:COUNT.
func parseUIDRange(s string) (agent.UIDRange, error) {
	first, count, ok := strings.Cut(s, ":")
	f, err1 := strconv.ParseUint(first, 10, 32)
	n, err2 := strconv.ParseUint(count, 10, 32)
	if !ok || err1 != nil || err2 != nil || f == 0 || n == 0 || f+n > 1<<32-1 {
		return agent.UIDRange{}, usageErr("--task-uids %q: want FIRST:COUNT, e.g. 200000:1000 (uids not used by anyone else)", s)
	}
	return agent.UIDRange{First: uint32(f), Count: uint32(n)}, nil
}

// clientAuth are the global flags naming a client's credentials.
type clientAuth struct {
	ca, cert, key, token string
}

func (c *clientAuth) add(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&c.ca, "ca", "", "the cell's CA certificate `FILE` (default $CORRAL_CA, else that of the corral up cell in $CORRAL_DATA or "+DefaultData+")")
	pf.StringVar(&c.cert, "cert", "", "your certificate (default $CORRAL_CERT)")
	pf.StringVar(&c.key, "key", "", "your certificate's key (default $CORRAL_KEY)")
	pf.StringVar(&c.token, "token", "", "your bearer token, or @FILE holding it (default $CORRAL_TOKEN)")
}

// certsDir is where `corral up` keeps its cell's credentials.
func certsDir(data string) string { return filepath.Join(data, "certs") }

// dialOptions finds the caller's credentials: the flags or their
// variables, else those `corral up` left in the local data dir for user;
// with neither, none (plaintext, for a master run with --insecure).
func (a *app) dialOptions(user, data string) ([]grpc.DialOption, error) {
	pick := func(flag, env string) string {
		if flag != "" {
			return flag
		}
		return a.getenv(env)
	}
	o := auth.ClientOptions{CAFile: pick(a.auth.ca, "CORRAL_CA"), CertFile: pick(a.auth.cert, "CORRAL_CERT"),
		KeyFile: pick(a.auth.key, "CORRAL_KEY"), Token: pick(a.auth.token, "CORRAL_TOKEN")}
	if strings.HasPrefix(o.Token, "@") {
		tok, err := auth.ReadToken(o.Token[1:])
		if err != nil {
			return nil, fmt.Errorf("--token %s: %w", o.Token, err)
		}
		o.Token = tok
	}
	local := certsDir(a.dataDir(data))
	if o.CertFile != "" || o.Token != "" {
		if o.CertFile != "" && o.KeyFile == "" {
			return nil, usageErr("--cert %s: give its key too (--key or CORRAL_KEY)", o.CertFile)
		}
		if o.CAFile == "" {
			if _, err := os.Stat(filepath.Join(local, auth.CAFile)); err != nil {
				return nil, usageErr("give the cell's CA certificate (--ca or CORRAL_CA) with your certificate or token")
			}
			o.CAFile = filepath.Join(local, auth.CAFile)
		}
		return o.DialOptions()
	}
	if o.CAFile != "" {
		return nil, usageErr("--ca %s: give a certificate (--cert, --key) or a token (--token) too", o.CAFile)
	}
	if _, err := os.Stat(filepath.Join(local, auth.CAFile)); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		a.noCredentials = local
		return nil, nil // no local cell: an insecure master, trusting the user header
	}
	lo, err := auth.LocalClient(local, user)
	if err != nil {
		return nil, fmt.Errorf("%w (or give --cert and --key, or --token)", err)
	}
	return lo.DialOptions()
}
