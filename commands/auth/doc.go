// Package auth is who may talk to a corral cell and what they may do at the
// transport: the cell's certificate authority, the identities it vouches
// for, bearer tokens for people, the gRPC interceptors that authenticate
// every call and shed load past per-user rates, and the sealing of secret
// environment values so they never reach the log in the clear.
//
// # Owns
//
//   - The cell directory (Init, Open): a CA (ECDSA P-256, standard library
//     crypto), certificates for masters, agents and users under
//     masters/, agents/ and users/, a secrets key and a tokens file. Every
//     file is written 0600 in directories 0700.
//   - Identity: a certificate names its holder (CN) and role (the OU, and a
//     SAN URI corral://<cell>/<role>/<name>). Roles: master, agent, user,
//     admin. Admin is Borg's capability to change any job and set quotas.
//   - Credentials: TLS configs and gRPC options for mutual TLS. Servers
//     verify client certificates against the cell's CA only; clients check
//     the server's certificate and its role (an agent accepts polls only
//     from a master, a master registers only agents).
//   - Tokens: random bearer tokens for users, stored as SHA-256 hashes and
//     compared in constant time; accepted only over TLS.
//   - Authenticator: unary and stream interceptors that authenticate the
//     caller (certificate, else token), enforce which roles may call which
//     service, drop the x-corral-user header so it cannot be forged, and put
//     the Identity in the context (FromContext).
//   - Limiter: bounded in-flight requests and a token bucket per user,
//     applied in a gRPC tap before a request is read; past either,
//     ResourceExhausted at once rather than a queue that slows all.
//   - StreamCaps: the long calls (log streams) open at once, per user and
//     over the cell; past either, ResourceExhausted naming the cap at once.
//     The master's one log path takes its slots (commands/master).
//   - Secrets: AES-GCM sealing of the env values a spec names in secret_env,
//     done by an interceptor before the command is decided, so the log and
//     the Infrastore hold only ciphertext bound to the job (user/name);
//     replies show "<redacted>"; the master's link unseals them into the
//     StartTask it sends an agent over mutual TLS.
//
// # Invariants
//
//   - With an Authenticator installed, no request reaches a service without
//     an Identity from a verified certificate or a known token, and the
//     x-corral-user header is never seen by the service.
//   - A certificate counts only if it chains to this cell's CA and names
//     this cell.
//   - Token plaintexts are never stored by the master; only their hashes.
//   - A secret's plaintext exists only in the request being sealed, in the
//     poll sent to the agent that runs the task, and in the agent's
//     (0600) state and the task's environment.
//
// # Insecure mode
//
// Without an Authenticator (the --insecure mode of the corral command) the
// master trusts the x-corral-user header as before: for development on a
// trusted machine only.
package auth
