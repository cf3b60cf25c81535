package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/corralhq/corral/internal/shareddata"
	"github.com/corralhq/corral/scheduler"
	"github.com/corralhq/corral/scheduler/workload"
)

func main() {
	// The fake API server answers lists and watches, not the streaming
	// list client-go would otherwise ask for.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubepack:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("kubepack", flag.ContinueOnError)
	name := fs.String("workload", "openb", "a workload folder, the name of one in the shared workloads folder, or family:<member> (corral's generated cells)")
	mode := fs.String("mode", string(workload.CompactRandom), "removal order: random or largest-first (corral's RemovalOrder)")
	seeds := fs.Int("seeds", 3, "seeds, each with its own removal order")
	firstSeed := fs.Uint64("first-seed", 1, "the first seed")
	profiles := fs.String("profile", "binpack", "kube-scheduler profiles, comma-separated: "+strings.Join(profileNames, ", "))
	percentage := fs.Int("percentage", 0, "percentageOfNodesToScore (0: kube-scheduler's adaptive default)")
	machines := fs.Int("machines", 0, "pack once on this many machines of each seed's order instead of searching")
	stable := fs.Int("stable", 0, "how far above the answer the fit must hold (corral's SmallestFit)")
	maxPods := fs.Int64("max-pods", 1000, "pods a node allows (kubelet's default is 110; higher never binds here)")
	timeout := fs.Duration("timeout", time.Hour, "the longest one packing may take")
	verbosity := fs.Int("v", 0, "kube-scheduler's log verbosity")
	progress := fs.Bool("progress", false, "report a long packing's progress on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	if err := klogFlags.Set("v", fmt.Sprint(*verbosity)); err != nil {
		return err
	}
	if *percentage < 0 || *percentage > 100 {
		return fmt.Errorf("-percentage: %d is not within 0-100", *percentage)
	}
	m := workload.CompactionMode(*mode)
	if m != workload.CompactRandom && m != workload.CompactLargestFirst {
		return fmt.Errorf("-mode: %q is not random or largest-first", *mode)
	}
	if *machines < 0 {
		return fmt.Errorf("-machines: %d is negative", *machines)
	}
	if *stable < 0 {
		return fmt.Errorf("-stable: %d is negative", *stable)
	}
	if *maxPods < 1 {
		return fmt.Errorf("-max-pods: %d, want at least 1", *maxPods)
	}
	if *timeout <= 0 {
		return fmt.Errorf("-timeout: %v, want more than 0", *timeout)
	}
	if *seeds < 1 || *firstSeed+uint64(*seeds) < *firstSeed {
		return fmt.Errorf("-seeds: %d from -first-seed %d, want at least 1 and no wrap past 2^64", *seeds, *firstSeed)
	}
	w, err := loadWorkload(*name)
	if err != nil {
		return err
	}
	lb, binding, err := workload.LowerBound(w.Machines, w.Tasks)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "workload %s: %d machines, %d tasks, lower bound %d (%s); mode %s\n",
		w.Name, len(w.Machines), len(w.Tasks), lb, binding, m)
	settings := packSettings{MaxPods: *maxPods, Timeout: *timeout}
	if *progress {
		settings.Progress = func(s string) { fmt.Fprintln(os.Stderr, "  ...", s) }
	}
	if *percentage > 0 {
		p := int32(*percentage)
		settings.PercentageOfNodesToScore = &p
	}
	// Every profile is built before the first packing, so a bad name is
	// refused at once, not after hours of packing with the good ones.
	names := strings.Split(*profiles, ",")
	built := make([]config.KubeSchedulerProfile, len(names))
	for i, pn := range names {
		if built[i], err = buildProfile(pn, usesGPU(w.Tasks)); err != nil {
			return err
		}
	}
	ctx := context.Background()
	for i, pn := range names {
		settings.Profile = built[i]
		var answers []int
		for seed := *firstSeed; seed < *firstSeed+uint64(*seeds); seed++ {
			order := workload.RemovalOrder(w.Machines, w.Tasks, m, seed)
			probe := func(n int) (packing, error) {
				p, err := pack(ctx, order[:n], w.Tasks, settings)
				if err != nil {
					return p, err
				}
				fmt.Fprintf(out, "  %s seed %d: %d machines: %d placed, %d unplaced (%d evicted by preemption), %.1f s\n",
					pn, seed, n, p.Placed, p.unplaced(), p.Evicted, p.Elapsed.Seconds())
				if len(p.Left) > 0 {
					fmt.Fprintf(out, "    not placed: %s\n", describe(w.Tasks, p.Left))
				}
				return p, nil
			}
			if *machines > 0 {
				if _, err := probe(min(*machines, len(order))); err != nil {
					return err
				}
				continue
			}
			answer, err := compact(order, w.Tasks, *stable, probe)
			if err != nil {
				return err
			}
			if answer == 0 {
				fmt.Fprintf(out, "%s seed %d: does not fit the whole cell\n", pn, seed)
			} else {
				fmt.Fprintf(out, "%s seed %d: %d machines (%.3f of the lower bound)\n", pn, seed, answer, float64(answer)/float64(lb))
			}
			answers = append(answers, answer)
		}
		if len(answers) > 0 {
			if slices.Contains(answers, 0) {
				fmt.Fprintf(out, "%s %s: does not fit on every seed %v\n", pn, m, answers)
			} else {
				worst := slices.Max(answers)
				fmt.Fprintf(out, "%s %s: worst of %d seeds %d machines (%.3f of the lower bound %d), per seed %v\n",
					pn, m, len(answers), worst, float64(worst)/float64(lb), lb, answers)
			}
		}
	}
	return nil
}

// compact is corral's compaction search (SmallestFit over the seed's
// removal order, from the bound of the machines kept) with kube-scheduler
// packing each probe. It returns 0 when the workload does not fit the
// whole order.
func compact(order []*scheduler.Machine, tasks []scheduler.PendingTask, stable int, probe func(int) (packing, error)) (int, error) {
	var failed error
	fits := func(n int) bool {
		if failed != nil {
			return false
		}
		p, err := probe(n)
		if err != nil {
			failed = err
			return false
		}
		return p.unplaced() == 0
	}
	if !fits(len(order)) {
		return 0, failed
	}
	lo := max(workload.PrefixBound(order, tasks)-1, 0)
	answer := workload.SmallestFit(lo, len(order), stable, fits)
	return answer, failed
}

// describe says which tasks were left: how many at each priority, and
// their CPU and memory requests (median and largest).
func describe(tasks []scheduler.PendingTask, left []int) string {
	byPriority := map[int32]int{}
	var cpu, mem []int64
	for _, i := range left {
		t := tasks[i]
		byPriority[t.Priority]++
		cpu = append(cpu, t.Resources[scheduler.CPU])
		mem = append(mem, t.Resources[scheduler.Memory])
	}
	var b strings.Builder
	b.WriteString("by priority")
	for _, p := range slices.Sorted(maps.Keys(byPriority)) {
		fmt.Fprintf(&b, " %d:%d", p, byPriority[p])
	}
	slices.Sort(cpu)
	slices.Sort(mem)
	fmt.Fprintf(&b, "; cpu median %.2f largest %.2f cores; memory median %d largest %d MiB",
		float64(cpu[len(cpu)/2])/1000, float64(cpu[len(cpu)-1])/1000, mem[len(mem)/2]>>20, mem[len(mem)-1]>>20)
	return b.String()
}

// loadWorkload reads a workload folder, or the one of that name in the
// shared workloads folder, or generates a member of corral's family.
func loadWorkload(name string) (*workload.Workload, error) {
	if w, ok, err := workload.FamilyWorkload(name); ok {
		return w, err
	}
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return workload.LoadWorkload(name)
	}
	dir, err := shareddata.Find(".", shareddata.Workloads)
	if err != nil {
		return nil, fmt.Errorf("-workload %s: %w", name, err)
	}
	return workload.LoadWorkload(filepath.Join(dir, name))
}
