package auth_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/history"
	"github.com/corralhq/corral/projections"
)

// A spec change is listed field by field, as the API shows specs: through
// its redaction, so a secret's value (in env while a client sends it, sealed
// once admitted) never appears, and the sealed bytes do not either.
func TestDiffShowsSpecChangesRedacted(t *testing.T) {
	// Two runs of one seed: the same cell twice, one to change.
	c, again := history.New(history.Small, 3), history.New(history.Small, 3)
	c.Run(2000)
	again.Run(2000)
	before, after := c.S, again.S
	var job *projections.Job
	for _, j := range after.SortedJobs() {
		if !j.Dead() {
			job = j
			break
		}
	}
	if job == nil {
		t.Fatal("no live job")
	}
	spec := proto.Clone(job.Spec()).(*events.JobSpec)
	spec.Env = map[string]string{"DB_PASSWORD": "hunter2", "MODE": "fast"}
	spec.SecretEnv = []string{"DB_PASSWORD"}
	spec.Overrides = map[int32]*events.TaskOverride{0: {Env: map[string]string{"SHARD": "zero"}}}
	spec.SealedEnv = []byte("sealed-bytes")
	e := events.Event{Position: after.Position + 1, Type: "JobUpdated", Stream: "job/" + job.User + "/" + job.Name,
		OccurredAt: c.Now, Data: &events.JobUpdated{Spec: spec, SpecVersion: job.Current + 1, PreviousVersion: job.Current}}
	if err := projections.Apply(after, e); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, ch := range projections.Diff(before, after, "", auth.RedactSpec) {
		text := fmt.Sprint(ch)
		for _, secret := range []string{"hunter2", "sealed-bytes", "c2VhbGVk"} {
			if strings.Contains(text, secret) {
				t.Errorf("the diff shows %q: %s", secret, text)
			}
		}
		if ch.What == "spec changed" {
			found = strings.Contains(ch.After, `+ env.DB_PASSWORD: "<redacted>"`) && strings.Contains(ch.After, `+ env.MODE: "fast"`) &&
				strings.Contains(ch.After, `+ overrides.0.env.SHARD: "zero"`) && strings.Contains(ch.After, `+ secret_env: ["DB_PASSWORD"]`)
			if !found {
				t.Errorf("spec change: %s", ch.After)
			}
		}
	}
	if !found {
		t.Fatal("the update is not in the diff")
	}
}
