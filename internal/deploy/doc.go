// Package deploy holds the checks of the deployment files at the repository's
// top (docker-compose.yml, Dockerfile). It has no code of its own: no Docker
// engine runs where corral is tested, so the compose file is validated with
// `docker-compose config -q` instead of being started.
package deploy
