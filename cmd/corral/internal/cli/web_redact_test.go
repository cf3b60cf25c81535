package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/webui"
	"github.com/corralhq/corral/events"
)

type secretAPI struct{ webui.API }

func (secretAPI) Get(context.Context, *apipb.GetRequest) (*apipb.JobView, error) {
	return &apipb.JobView{Spec: &events.JobSpec{Name: "db", SecretEnv: []string{"PW"}, Env: map[string]string{"PW": "hunter2"}, SealedEnv: []byte("sealed")}}, nil
}

// The web UI reads the Service in-process, past the interceptors: its
// replies are redacted all the same.
func TestWebUIRepliesAreRedacted(t *testing.T) {
	v, err := redactedAPI{secretAPI{}}.Get(context.Background(), &apipb.GetRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s := v.Spec.String(); strings.Contains(s, "hunter2") || len(v.Spec.SealedEnv) != 0 || v.Spec.Env["PW"] != "<redacted>" {
		t.Errorf("the UI would show %s", s)
	}
}
