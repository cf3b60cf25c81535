package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what `corral version` prints: the build's module version
// and the revision it was built from, as the Go toolchain stamped them.
type versionInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

func buildVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return versionInfo{Version: "unknown"}
	}
	v := versionInfo{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	if v.Version == "" {
		v.Version = "unknown"
	}
	return v
}

// versionCommand is `corral version`.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "show corral's version and the revision it was built from",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion()
			if a.output != "table" {
				return a.show(nil, v)
			}
			rev := "revision unknown (built without version control stamps)"
			if v.Revision != "" {
				rev = "revision " + v.Revision
				if v.Time != "" {
					rev += " of " + v.Time
				}
				if v.Modified {
					rev += ", with uncommitted changes"
				}
			}
			fmt.Fprintf(a.stdout(), "corral %s, %s, %s\n", v.Version, rev, v.GoVersion)
			return nil
		},
	}
}
