package cli

import (
	"fmt"
	"path/filepath"

	"github.com/corralhq/corral/commands/auth"
	"github.com/spf13/cobra"
)

// certsCommand is `corral certs`: a cell's CA and the certificates it
// issues.
func (a *app) certsCommand() *cobra.Command {
	var dir string
	c := &cobra.Command{Use: "certs", Short: "make a cell's certificate authority and issue certificates"}
	c.PersistentFlags().StringVar(&dir, "dir", "", "the cell directory (default $CORRAL_CERTS, else DATA/certs: "+certsDir(DefaultData)+")")
	cellDir := func() string {
		if dir != "" {
			return dir
		}
		if d := a.getenv("CORRAL_CERTS"); d != "" {
			return d
		}
		return certsDir(a.dataDir(""))
	}
	var cell string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "create a cell directory: its CA, secrets key and tokens file (kept when they exist)",
		Args:  args(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cell == "" {
				cell = a.cellName()
			}
			c, err := auth.Init(cellDir(), cell)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "cell %s: CA %s\nissue certificates with `corral certs issue --dir %s --role master|agent|user|admin NAME`\n",
				c.Name, absPath(filepath.Join(c.Dir, auth.CAFile)), c.Dir)
			return nil
		},
	}
	initCmd.Flags().StringVar(&cell, "cell", "", "the cell's name (default $CORRAL_CELL or "+DefaultCell+")")
	var role string
	var hosts []string
	issue := &cobra.Command{
		Use:     "issue NAME",
		Short:   "issue a certificate and key for a master, agent (its machine's name), user or admin",
		Example: "  corral certs issue --role agent m1 --host m1.example.com\n  corral certs issue --role user alice",
		Args:    args(1, 1, "one NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			r := auth.Role(role)
			if !r.Valid() {
				return usageErr("--role %q: want user, admin, agent or master", role)
			}
			c, err := auth.Open(cellDir())
			if err != nil {
				return err
			}
			certFile, keyFile, err := c.Issue(r, argv[0], hosts...)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "%s %s of cell %s:\n  certificate %s\n  key         %s\n  CA          %s\n",
				r, argv[0], c.Name, absPath(certFile), absPath(keyFile), absPath(filepath.Join(c.Dir, auth.CAFile)))
			return nil
		},
	}
	issue.Flags().StringVar(&role, "role", "user", "user, admin, agent or master")
	issue.Flags().StringArrayVar(&hosts, "host", nil, "a DNS name or IP address the master or agent is reached at (repeat the flag); localhost is always included")
	c.AddCommand(initCmd, issue)
	return c
}
