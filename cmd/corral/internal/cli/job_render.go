package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) jobRenderCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "render FILE",
		Short: "print the job spec(s) a file resolves to, as JSON (or -o yaml)",
		Long: `Evaluate FILE (Jsonnet, YAML or JSON), check it as a submission would, and
print what it resolves to: quantities, bands and durations written out. The
output is itself a job file. Errors name the file, line and field.`,
		Args: args(1, 1, "one job file"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			f, err := a.loadFile(argv[0])
			if err != nil {
				return err
			}
			format := "json"
			if a.output == "yaml" {
				format = "yaml"
			}
			out, err := f.Render(format)
			if err != nil {
				return err
			}
			_, err = a.stdout().Write(out)
			return err
		},
	}
}
