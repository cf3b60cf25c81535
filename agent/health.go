package agent

import (
	"context"
	"fmt"
	"net/http"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
)

// prober checks one health URL; nil means healthy.
type prober func(ctx context.Context, url string) error

// healthClient never reuses connections: a check must see a server that
// accepts new ones.
var healthClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// httpProbe is healthy on a 2xx or 3xx answer, as Kubernetes' HTTP probes.
// Checks go to 127.0.0.1: a task listens on its machine's ports.
func httpProbe(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// armHealth schedules t's next health check, if it has one. a.mu held.
func (a *Agent) armHealth(t *task) {
	h := t.spec.HealthCheck
	if h.GetPath() == "" || t.proc == nil {
		t.health = agentpb.Health_HEALTH_UNSPECIFIED
		return
	}
	if t.health == agentpb.Health_HEALTH_UNSPECIFIED {
		t.health = agentpb.Health_HEALTH_UNKNOWN
	}
	period := events.HealthCheckPeriod(h)
	key, gen := t.key, t.gen
	t.healthTimer = a.clock.AfterFunc(period, func() { a.checkHealth(key, gen) })
}

// checkHealth probes the task off the lock, then counts the result: more
// consecutive failures than the check allows restart the task.
func (a *Agent) checkHealth(key string, gen int64) {
	a.mu.Lock()
	t := a.tasks[key]
	if a.closed || t == nil || t.gen != gen || t.state != agentpb.TaskState_TASK_STATE_RUNNING {
		a.mu.Unlock()
		return
	}
	t.healthTimer = nil
	h := t.spec.HealthCheck
	port, err := healthPort(t.spec)
	url := fmt.Sprintf("http://127.0.0.1:%d%s", port, h.Path)
	timeout := events.HealthCheckTimeout(h)
	probe := a.probe
	a.mu.Unlock()

	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err = probe(ctx, url)
		cancel()
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	t = a.tasks[key]
	if a.closed || t == nil || t.gen != gen || t.state != agentpb.TaskState_TASK_STATE_RUNNING {
		return
	}
	if err == nil {
		if t.health != agentpb.Health_HEALTH_HEALTHY || t.healthFailures != 0 {
			a.markDirty()
		}
		t.health, t.healthFailures, t.healthMessage = agentpb.Health_HEALTH_HEALTHY, 0, ""
		a.armHealth(t)
		return
	}
	t.health, t.healthMessage = agentpb.Health_HEALTH_UNHEALTHY, err.Error()
	t.healthFailures++
	a.metrics.healthFailures.WithLabelValues(bandOf(t.spec.GetPriority())).Inc()
	a.markDirty()
	if t.healthFailures > h.FailuresAllowed {
		t.message = fmt.Sprintf("health check failed %d times in a row: %v", t.healthFailures, err)
		a.terminate(t, KillHealth, killTimeout(t.spec, 0, a.cfg.DefaultGrace), ReasonHealth)
		return
	}
	a.armHealth(t)
}
