package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/corralhq/corral/scheduler"
)

func TestMain(m *testing.M) {
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

func machines(n int, cores int64) []*scheduler.Machine {
	var ms []*scheduler.Machine
	for i := range n {
		ms = append(ms, &scheduler.Machine{Name: fmt.Sprintf("m%d", i), Version: 1,
			Capacity: scheduler.Resources{scheduler.CPU: cores * 1000, scheduler.Memory: cores << 30}})
	}
	return ms
}

func task(job string, i int32, prio int32, cores int64) scheduler.PendingTask {
	return scheduler.PendingTask{Ref: scheduler.TaskRef{User: "u", Job: job, Index: i}, Priority: prio,
		Resources: scheduler.Resources{scheduler.CPU: cores * 1000, scheduler.Memory: cores << 29}}
}

func settings(t *testing.T, profile string) packSettings {
	t.Helper()
	p, err := buildProfile(profile, false)
	if err != nil {
		t.Fatal(err)
	}
	return packSettings{Profile: p, MaxPods: 110, Timeout: time.Minute}
}

// Two 2-core tasks go first (higher priority), then a 4-core one, on two
// 4-core machines. kube-scheduler's default profile spreads the small
// ones over both machines and strands the big one; the bin-packing
// profile stacks them and places all three. The counts come from the
// bindings the fake API server received.
func TestProfilesPackAsKubeSchedulerDoes(t *testing.T) {
	tasks := []scheduler.PendingTask{task("big", 0, 1, 4), task("small", 0, 5, 2), task("small", 1, 5, 2)}
	for _, c := range []struct {
		profile  string
		unplaced int
	}{{"default", 1}, {"binpack", 0}} {
		p, err := pack(context.Background(), machines(2, 4), tasks, settings(t, c.profile))
		if err != nil {
			t.Fatal(err)
		}
		if p.unplaced() != c.unplaced || p.Evicted != 0 {
			t.Errorf("%s: %d unplaced, %d evicted; want %d and 0", c.profile, p.unplaced(), p.Evicted, c.unplaced)
		}
	}
}

// A task larger than every machine stays pending, and the packing still
// ends (the scheduler goes quiet with it unschedulable).
func TestATaskThatFitsNowhereEndsThePacking(t *testing.T) {
	tasks := []scheduler.PendingTask{task("huge", 0, 5, 9), task("small", 0, 5, 1)}
	p, err := pack(context.Background(), machines(3, 8), tasks, settings(t, "binpack"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Placed != 1 || p.unplaced() != 1 {
		t.Errorf("placed %d, unplaced %d; want 1 and 1", p.Placed, p.unplaced())
	}
}

// The search is corral's: the answer is the smallest prefix of the
// order on which kube-scheduler places every task.
func TestCompactFindsTheSmallestFittingPrefix(t *testing.T) {
	var tasks []scheduler.PendingTask
	for i := range 6 {
		tasks = append(tasks, task("t", int32(i), 5, 4))
	}
	s := settings(t, "binpack")
	probe := func(n int) (packing, error) {
		return pack(context.Background(), machines(10, 8)[:n], tasks, s)
	}
	got, err := compact(machines(10, 8), tasks, 2, probe)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3 {
		t.Errorf("compact = %d machines, want 3 (six 4-core tasks on 8-core machines)", got)
	}
	if got, _ := compact(machines(2, 8), tasks, 0, func(n int) (packing, error) {
		return pack(context.Background(), machines(2, 8)[:n], tasks, s)
	}); got != 0 {
		t.Errorf("compact on a cell too small = %d, want 0", got)
	}
}

func TestDescribeSaysWhatWasLeft(t *testing.T) {
	tasks := []scheduler.PendingTask{task("a", 0, 1, 2), task("b", 0, 9, 4), task("c", 0, 1, 8)}
	got := describe(tasks, []int{0, 2})
	want := "by priority 1:2; cpu median 8.00 largest 8.00 cores; memory median 4096 largest 4096 MiB"
	if got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
}

// A family member of corral's generated cells is named where a workload
// folder is expected; an unknown member is refused by name.
func TestLoadWorkloadTakesAFamilyMember(t *testing.T) {
	w, err := loadWorkload("family:cpu-one-large-80")
	if err != nil || len(w.Machines) != 200 || len(w.Tasks) == 0 {
		t.Fatalf("family:cpu-one-large-80: %v", err)
	}
	if _, err := loadWorkload("family:nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("family:nope: %v, want an error naming the member", err)
	}
}

// A bind answered after the informer stopped its watch (the end of a
// packing) is still answered, and nothing is sent on the closed watch.
func TestABindAfterTheWatchStoppedDoesNotPanic(t *testing.T) {
	tasks := []scheduler.PendingTask{task("a", 0, 1, 1), task("b", 0, 1, 1)}
	c := newCluster(machines(1, 4), tasks, 110)
	ctx := context.Background()
	w, err := c.client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bind := func(name string) error {
		return c.client.CoreV1().Pods(metav1.NamespaceDefault).Bind(ctx,
			&v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: v1.ObjectReference{Kind: "Node", Name: "m0"}},
			metav1.CreateOptions{})
	}
	if err := bind("a-0"); err != nil {
		t.Fatal(err)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Modified || ev.Object.(*v1.Pod).Spec.NodeName != "m0" {
		t.Errorf("event %v %v, want the pod modified onto m0", ev.Type, ev.Object)
	}
	w.Stop()
	if err := bind("b-0"); err != nil {
		t.Fatal(err)
	}
	if err := bind("b-0"); err == nil {
		t.Error("binding a bound pod again succeeded")
	}
	if bound, _ := c.counts(); bound != 2 {
		t.Errorf("bound %d, want 2", bound)
	}
}
