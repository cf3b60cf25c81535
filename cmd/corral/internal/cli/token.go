package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/corralhq/corral/commands/auth"
	"github.com/spf13/cobra"
)

// tokenCommand is `corral token`: bearer tokens for people.
func (a *app) tokenCommand() *cobra.Command {
	var dir string
	c := &cobra.Command{Use: "token", Short: "issue and revoke people's bearer tokens"}
	c.PersistentFlags().StringVar(&dir, "dir", "", "the cell directory (default $CORRAL_CERTS, else DATA/certs: "+certsDir(DefaultData)+")")
	tokens := func() (*auth.Tokens, error) {
		d := dir
		if d == "" {
			d = a.getenv("CORRAL_CERTS")
		}
		if d == "" {
			d = certsDir(a.dataDir(""))
		}
		if _, err := os.Stat(filepath.Join(d, auth.CAFile)); err != nil {
			return nil, fmt.Errorf("%s is not a cell directory (corral certs init): %w", d, err)
		}
		return auth.NewTokens(filepath.Join(d, auth.TokensFile)), nil
	}
	var role string
	issue := &cobra.Command{
		Use:   "issue NAME",
		Short: "issue a token for a user or admin; it is printed once and only its hash is kept",
		Args:  args(1, 1, "one NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			r := auth.Role(role)
			if r != auth.RoleUser && r != auth.RoleAdmin {
				return usageErr("--role %q: tokens are for people: user or admin", role)
			}
			t, err := tokens()
			if err != nil {
				return err
			}
			tok, err := t.Issue(argv[0], r)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout(), tok)
			a.note("token for %s %s: give it as --token or CORRAL_TOKEN, with the cell's CA (--ca or CORRAL_CA); it is not shown again", r, argv[0])
			return nil
		},
	}
	issue.Flags().StringVar(&role, "role", "user", "user or admin")
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "revoke every token of NAME (a running master stops accepting them within a second)",
		Args:  args(1, 1, "one NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			t, err := tokens()
			if err != nil {
				return err
			}
			n, err := t.Revoke(argv[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout(), "revoked %d token(s) of %s\n", n, argv[0])
			return nil
		},
	}
	c.AddCommand(issue, revoke)
	return c
}
