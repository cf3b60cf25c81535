package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
)

// profileNames are the kube-scheduler profiles kubepack knows.
var profileNames = []string{"default", "binpack"}

// buildProfile returns kube-scheduler's default profile as the scheduler
// itself defaults it, changed for name:
//   - default: unchanged (NodeResourcesFit scores LeastAllocated: spreading);
//   - binpack: NodeResourcesFit scores MostAllocated, the bin-packing setting
//     Kubernetes documents ("Resource Bin Packing"), over CPU, memory and,
//     when the workload asks for GPUs, the GPU resource, weight 1 each.
func buildProfile(name string, gpu bool) (config.KubeSchedulerProfile, error) {
	var versioned configv1.KubeSchedulerConfiguration
	scheme.Scheme.Default(&versioned)
	var cfg config.KubeSchedulerConfiguration
	if err := scheme.Scheme.Convert(&versioned, &cfg, nil); err != nil {
		return config.KubeSchedulerProfile{}, err
	}
	p := cfg.Profiles[0]
	switch name {
	case "default":
		return p, nil
	case "binpack":
		resources := []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}
		if gpu {
			resources = append(resources, config.ResourceSpec{Name: gpuResource, Weight: 1})
		}
		for i, pc := range p.PluginConfig {
			if pc.Name != "NodeResourcesFit" {
				continue
			}
			args, ok := pc.Args.(*config.NodeResourcesFitArgs)
			if !ok {
				return p, fmt.Errorf("profile binpack: NodeResourcesFit args are %T", pc.Args)
			}
			args = args.DeepCopy()
			args.ScoringStrategy = &config.ScoringStrategy{Type: config.MostAllocated, Resources: resources}
			p.PluginConfig[i].Args = runtime.Object(args)
			return p, nil
		}
		return p, fmt.Errorf("profile binpack: the default profile has no NodeResourcesFit config")
	}
	return p, fmt.Errorf("-profile: %q is not one of %v", name, profileNames)
}
