package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/corralhq/corral/scheduler"
)

// gpuResource is the extended resource a workload's gpu_milli becomes:
// kube-scheduler has no fractional GPUs, so GPUs are counted in
// thousandths, the workload format's own unit.
const gpuResource = "corral.dev/gpu-milli"

// Pod states in a cluster.
const (
	podPending int8 = iota
	podBound
	podEvicted // bound, then deleted by preemption: not placed
)

// cluster is the API server kube-scheduler talks to: the nodes and pods
// of one packing, held in memory. Nodes and pods are listed in the
// workload's order (pods in submission order); binding and deletion change
// the pod and are sent to every watcher, as the API server would.
type cluster struct {
	client *fake.Clientset

	mu       sync.Mutex
	nodes    []v1.Node
	pods     []v1.Pod
	state    []int8
	index    map[string]int // pod name -> position in pods
	version  int64          // the last resourceVersion handed out
	watchers []*podWatch
	bound    int // pods in state podBound
	evicted  int
}

func newCluster(machines []*scheduler.Machine, tasks []scheduler.PendingTask, maxPods int64) *cluster {
	c := &cluster{
		nodes: make([]v1.Node, len(machines)),
		pods:  make([]v1.Pod, len(tasks)),
		state: make([]int8, len(tasks)),
		index: make(map[string]int, len(tasks)),
	}
	for i, m := range machines {
		c.nodes[i] = node(m, maxPods)
	}
	for i, t := range tasks {
		c.pods[i] = pod(t)
		c.index[c.pods[i].Name] = i
	}
	c.version = 1
	c.client = fake.NewClientset()
	c.client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return true, &v1.NodeList{ListMeta: c.listMeta(), Items: slices.Clone(c.nodes)}, nil
	})
	c.client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return true, &v1.PodList{ListMeta: c.listMeta(), Items: slices.Clone(c.pods)}, nil
	})
	// Nodes never change after the list; pods change by binding and
	// eviction. The watchers' buffers hold every event a packing can make
	// (a bind and a deletion per pod), so no send ever blocks.
	c.client.PrependWatchReactor("nodes", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, newPodWatch(0), nil
	})
	c.client.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		w := newPodWatch(2*len(tasks) + 16)
		c.mu.Lock()
		c.watchers = append(c.watchers, w)
		c.mu.Unlock()
		return true, w, nil
	})
	c.client.PrependReactor("create", "pods", c.bind)
	c.client.PrependReactor("delete", "pods", c.delete)
	c.client.PrependReactor("get", "pods", c.get)
	// Status patches (the PodScheduled condition, the nominated node) are
	// the scheduler's report to users; nothing here reads them back.
	c.client.PrependReactor("patch", "pods", c.get)
	return c
}

// podWatch is one watch on the cluster: its buffer holds every event a
// packing can make, and nothing is sent once its reader has stopped it
// (an informer stopping at the end of a packing while a bind is answered
// must not panic on a closed channel).
type podWatch struct {
	mu      sync.Mutex
	stopped bool
	events  chan watch.Event
}

func newPodWatch(size int) *podWatch { return &podWatch{events: make(chan watch.Event, size)} }

func (w *podWatch) ResultChan() <-chan watch.Event { return w.events }

func (w *podWatch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		close(w.events)
	}
}

func (w *podWatch) send(t watch.EventType, obj runtime.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.events <- watch.Event{Type: t, Object: obj}
	}
}

func (c *cluster) listMeta() metav1.ListMeta {
	return metav1.ListMeta{ResourceVersion: fmt.Sprint(c.version)}
}

var podsResource = schema.GroupResource{Resource: "pods"}

func (c *cluster) bind(a clienttesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "binding" {
		return false, nil, nil
	}
	b, ok := a.(clienttesting.CreateAction).GetObject().(*v1.Binding)
	if !ok {
		return true, nil, fmt.Errorf("binding: got %T", a.(clienttesting.CreateAction).GetObject())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[b.Name]
	if !ok || c.state[i] == podEvicted {
		return true, nil, apierrors.NewNotFound(podsResource, b.Name)
	}
	if c.state[i] == podBound {
		return true, nil, apierrors.NewConflict(podsResource, b.Name, fmt.Errorf("pod %s is already bound to %s", b.Name, c.pods[i].Spec.NodeName))
	}
	p := c.pods[i].DeepCopy()
	p.Spec.NodeName = b.Target.Name
	c.version++
	p.ResourceVersion = fmt.Sprint(c.version)
	c.pods[i], c.state[i] = *p, podBound
	c.bound++
	for _, w := range c.watchers {
		w.send(watch.Modified, p.DeepCopy())
	}
	return true, b, nil
}

func (c *cluster) delete(a clienttesting.Action) (bool, runtime.Object, error) {
	name := a.(clienttesting.DeleteAction).GetName()
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[name]
	if !ok || c.state[i] == podEvicted {
		return true, nil, apierrors.NewNotFound(podsResource, name)
	}
	if c.state[i] == podBound {
		c.bound--
		c.evicted++
	}
	c.state[i] = podEvicted
	for _, w := range c.watchers {
		w.send(watch.Deleted, c.pods[i].DeepCopy())
	}
	return true, nil, nil
}

func (c *cluster) get(a clienttesting.Action) (bool, runtime.Object, error) {
	var name string
	switch a := a.(type) {
	case clienttesting.GetAction:
		name = a.GetName()
	case clienttesting.PatchAction:
		name = a.GetName()
	default:
		return false, nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[name]
	if !ok || c.state[i] == podEvicted {
		return true, nil, apierrors.NewNotFound(podsResource, name)
	}
	return true, c.pods[i].DeepCopy(), nil
}

// counts returns the pods bound now and the pods evicted after binding.
func (c *cluster) counts() (bound, evicted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bound, c.evicted
}

// unplaced returns the positions of the tasks not bound now.
func (c *cluster) unplaced() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var left []int
	for i, st := range c.state {
		if st != podBound {
			left = append(left, i)
		}
	}
	return left
}

// usesGPU reports whether any task asks for a GPU.
func usesGPU(tasks []scheduler.PendingTask) bool {
	for _, t := range tasks {
		if t.Resources[scheduler.GPU] > 0 {
			return true
		}
	}
	return false
}

// node is a machine as a kubelet would register it: its capacity all
// allocatable (the workload's capacities are what tasks may use).
func node(m *scheduler.Machine, maxPods int64) v1.Node {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(m.Capacity[scheduler.CPU], resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(m.Capacity[scheduler.Memory], resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(maxPods, resource.DecimalSI),
	}
	if g := m.Capacity[scheduler.GPU]; g > 0 {
		capacity[gpuResource] = *resource.NewQuantity(g, resource.DecimalSI)
	}
	labels := map[string]string{v1.LabelHostname: m.Name}
	if rack := m.Attributes["rack"]; rack != "" {
		labels[v1.LabelTopologyZone] = rack
	}
	return v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, UID: types.UID("node-" + m.Name), Labels: labels, ResourceVersion: "1"},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}

// pod is a task as a controller would create it: its request is its
// limit, its priority set (as the priority admission plugin would).
func pod(t scheduler.PendingTask) v1.Pod {
	name := strings.ToLower(fmt.Sprintf("%s-%d", t.Ref.Job, t.Ref.Index))
	request := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(t.Resources[scheduler.CPU], resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(t.Resources[scheduler.Memory], resource.BinarySI),
	}
	if g := t.Resources[scheduler.GPU]; g > 0 {
		request[gpuResource] = *resource.NewQuantity(g, resource.DecimalSI)
	}
	priority := t.Priority
	return v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, UID: types.UID("pod-" + name), ResourceVersion: "1"},
		Spec: v1.PodSpec{
			SchedulerName: v1.DefaultSchedulerName,
			Priority:      &priority,
			Containers: []v1.Container{{
				Name: "task", Image: "task",
				Resources: v1.ResourceRequirements{Requests: request, Limits: request},
			}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
}
