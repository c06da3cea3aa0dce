package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/service"
	"github.com/aidgen/aid/runtime/service/pgkeys"
)

// newKeys is aidgen keys: the API keys created at run time, in the
// service's PostgreSQL state.
func newKeys(s *streams) *cobra.Command {
	var dsn string
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke the API keys a PostgreSQL-state service accepts beside its declared ones",
		Long: `Keys manages the API keys kept in the service's PostgreSQL state (the
database of service.state's dsnEnv), which every replica accepts beside the
keys app.cue declares. A secret is printed once, at create: the database
keeps its SHA-256 only. A revoked key is refused by every replica within
5 seconds (service.DefaultKeyCacheTTL); its name is not given again.`,
		Example: `  aidgen keys create frontend --role caller --tenant acme --dsn "$DATABASE_URL"
  aidgen keys list --dsn "$DATABASE_URL"
  aidgen keys revoke frontend --dsn "$DATABASE_URL"`,
	}
	cmd.PersistentFlags().StringVar(&dsn, "dsn", "", "PostgreSQL `DSN` of the service's state")
	open := func(ctx context.Context) (*pgkeys.Store, error) {
		if dsn == "" {
			return nil, usageErr(errors.New("keys needs --dsn DSN: the PostgreSQL database of the service's state"))
		}
		return pgkeys.Open(ctx, dsn)
	}
	var roles []string
	var tenant string
	create := &cobra.Command{
		Use:   "create NAME --role ROLE [--role ROLE] [--tenant TENANT] --dsn DSN",
		Short: "Create a key and print its secret, once",
		Args:  exactlyOne("create", "a key name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(roles) == 0 {
				return usageErr(fmt.Errorf("create needs at least one --role: %v", service.Roles))
			}
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			rs := make([]service.Role, len(roles))
			for i, r := range roles {
				rs[i] = service.Role(r)
			}
			secret, err := st.Create(cmd.Context(), args[0], rs, tenant)
			if err != nil {
				return err
			}
			fmt.Fprintln(s.out, secret)
			fmt.Fprintf(s.err, "key %q created; its secret is above, and is shown only now\n", args[0])
			return nil
		},
	}
	create.Flags().StringSliceVar(&roles, "role", nil, "a role of the key: caller, approver, operator or admin (repeat, or comma-separate)")
	create.Flags().StringVar(&tenant, "tenant", "", "the key's tenant; empty for none")
	list := &cobra.Command{
		Use:   "list --dsn DSN",
		Short: "List the keys, revoked ones included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			keys, err := st.List(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tROLES\tTENANT\tCREATED\tREVOKED")
			for _, k := range keys {
				names := make([]string, len(k.Roles))
				for i, r := range k.Roles {
					names[i] = string(r)
				}
				revoked := "-"
				if !k.Revoked.IsZero() {
					revoked = k.Revoked.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.Name, strings.Join(names, ","), dash(k.Tenant), k.Created.UTC().Format(time.RFC3339), revoked)
			}
			return w.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME --dsn DSN",
		Short: "Revoke a key: every replica refuses it within 5 seconds",
		Args:  exactlyOne("revoke", "a key name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.Revoke(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(s.err, "key %q revoked: every replica refuses it within %v\n", args[0], service.DefaultKeyCacheTTL)
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func exactlyOne(verb, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErr(fmt.Errorf("%s needs exactly one argument, %s", verb, what))
		}
		return nil
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
