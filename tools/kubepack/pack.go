package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/events"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	queue "k8s.io/kubernetes/pkg/scheduler/backend/queue"

	"github.com/corralhq/corral/scheduler"
)

// packing is the outcome of one kube-scheduler run.
type packing struct {
	Machines, Tasks int
	Placed          int // bound and not evicted
	Evicted         int // bound, then preempted
	Elapsed         time.Duration
	Left            []int // positions in the tasks of those not placed
}

func (p packing) unplaced() int { return p.Tasks - p.Placed }

// packSettings are the kube-scheduler settings of a packing.
type packSettings struct {
	Profile config.KubeSchedulerProfile
	// PercentageOfNodesToScore: nil leaves kube-scheduler's adaptive
	// default (50% less 1% per 125 nodes, at least 5% and 100 nodes).
	PercentageOfNodesToScore *int32
	MaxPods                  int64
	Timeout                  time.Duration
	// Progress, when set, is told the state of the packing every
	// progressEvery: a long packing shows that it moves.
	Progress func(string)
}

const progressEvery = 30 * time.Second

// quietChecks is how many consecutive looks, quietPoll apart, must find
// the scheduler with nothing to do before a packing counts as finished.
const (
	quietChecks = 3
	quietPoll   = 200 * time.Millisecond
)

// pack runs kube-scheduler once with every task pending on machines, and
// returns when the scheduler is quiet: every pod bound or waiting as
// unschedulable, nothing queued, in backoff or in flight.
func pack(ctx context.Context, machines []*scheduler.Machine, tasks []scheduler.PendingTask, s packSettings) (packing, error) {
	start := time.Now()
	res := packing{Machines: len(machines), Tasks: len(tasks)}
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	c := newCluster(machines, tasks, s.MaxPods)
	informers := kubescheduler.NewInformerFactory(c.client, 0)
	// Pods found unschedulable are retried when an event could make room
	// for them (an eviction), as always, but not every five minutes: in a
	// packing nothing else frees room, and the periodic retries of
	// thousands of pods would keep the scheduler from going quiet.
	opts := []kubescheduler.Option{kubescheduler.WithProfiles(s.Profile),
		kubescheduler.WithPodMaxInUnschedulablePodsDuration(24 * time.Hour)}
	if s.PercentageOfNodesToScore != nil {
		opts = append(opts, kubescheduler.WithPercentageOfNodesToScore(s.PercentageOfNodesToScore))
	}
	// Events (Scheduled, FailedScheduling) are reports to users: dropped.
	discard := func(string) events.EventRecorderLogger { return &events.FakeRecorder{} }
	sched, err := kubescheduler.New(ctx, c.client, informers, nil, discard, opts...)
	if err != nil {
		return res, fmt.Errorf("kube-scheduler: %w", err)
	}
	informers.Start(ctx.Done())
	informers.WaitForCacheSync(ctx.Done())
	q := sched.SchedulingQueue
	// Every pod is pending at once: the scheduler starts only when the
	// informer has handed all of them to its queue, or the first pods
	// listed would be placed before higher-priority ones arrive.
	for {
		active, _, _, err := queueCounts(q)
		if err != nil {
			return res, err
		}
		if active == len(tasks) {
			break
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("kube-scheduler's queue holds %d of %d pods after %v", active, len(tasks), s.Timeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	defer func() { cancel(); <-done; informers.Shutdown() }()

	lastReport, lastBound := time.Now(), -1
	for quiet := 0; quiet < quietChecks; {
		select {
		case <-ctx.Done():
			bound, _ := c.counts()
			return res, fmt.Errorf("kube-scheduler not quiet after %v: %d of %d pods bound", s.Timeout, bound, len(tasks))
		case <-time.After(quietPoll):
		}
		// The queue is looked at (under its lock, copying its pods) only
		// when no pod was bound since the last look, so that the look
		// does not slow a packing that moves.
		bound, evicted := c.counts()
		moved := bound != lastBound
		lastBound = bound
		report := s.Progress != nil && time.Since(lastReport) >= progressEvery
		if moved && !report {
			quiet = 0
			continue
		}
		active, backoff, unschedulable, err := queueCounts(q)
		if err != nil {
			return res, err
		}
		if report {
			lastReport = time.Now()
			s.Progress(fmt.Sprintf("%d machines, %.0f s: %d bound, %d evicted, queue: %d active, %d in backoff, %d unschedulable",
				len(machines), time.Since(start).Seconds(), bound, evicted, active, backoff, unschedulable))
		}
		settled := !moved && active == 0 && backoff == 0 && len(q.InFlightPods()) == 0 &&
			bound+evicted+unschedulable == len(tasks)
		if settled {
			quiet++
		} else {
			quiet = 0
		}
	}
	res.Placed, res.Evicted = c.counts()
	res.Left = c.unplaced()
	res.Elapsed = time.Since(start)
	return res, nil
}

// queueCounts reads how many pods kube-scheduler's queue holds in each
// part, from the summary it gives of itself.
func queueCounts(q queue.SchedulingQueue) (active, backoff, unschedulable int, err error) {
	_, summary := q.PendingPods()
	if _, err := fmt.Sscanf(summary, "activeQ:%d; backoffQ:%d; unschedulablePods:%d", &active, &backoff, &unschedulable); err != nil {
		return 0, 0, 0, fmt.Errorf("kube-scheduler queue summary %q: %w", summary, err)
	}
	return active, backoff, unschedulable, nil
}
