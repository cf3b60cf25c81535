package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestComposeFileIsValid(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		msg := "docker-compose is not installed (Debian package docker-compose; .ci/run installs it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	file := filepath.Join("..", "..", "docker-compose.yml")
	out, err := exec.Command(bin, "-f", file, "config", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("docker-compose config -q: %v\n%s", err, out)
	}
	// The file describes the cell the design calls for.
	services, err := exec.Command(bin, "-f", file, "config", "--services").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(services))
	want := map[string]bool{"crdb1": true, "crdb2": true, "crdb3": true, "crdb-init": true, "master1": true, "master2": true, "master3": true, "agent1": true, "agent2": true, "certs": true}
	if len(got) != len(want) {
		t.Fatalf("services = %v, want %d of them", got, len(want))
	}
	for _, s := range got {
		if !want[s] {
			t.Fatalf("unexpected service %q", s)
		}
	}
	cfg, err := exec.Command(bin, "-f", file, "config").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"start --insecure --join=crdb1,crdb2,crdb3", "cockroach init", "--store", "--certs", "corral certs init"} {
		if !strings.Contains(string(cfg), must) {
			t.Errorf("resolved config lacks %q", must)
		}
	}
}
