package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
)

func (c *cli) keysCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "keys",
		Aliases: []string{"key"},
		Short:   "Show and rotate the id_token signing keys",
		Long: `The id_token signing keys move next → current → retired → deleted. A next key is published
in the JWKS before it signs; a retired key stays published until every id_token it signed has
expired. The scheduled rotation does this by itself; these commands show it and force it.`,
		RunE: groupRun,
	}
	cmd.AddCommand(c.keysList(), c.keysRotate(), c.keysJWKS())
	return cmd
}

func (c *cli) keysList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the signing keys with their states",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, _, err := c.openStore(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			set, err := st.Keys(cmd.Context())
			if err != nil {
				return fmt.Errorf("read the key registry: %w", err)
			}
			views := make([]keyView, 0, len(set.Keys))
			for _, k := range sortKeys(set.Keys) {
				views = append(views, viewKey(k))
			}
			return c.emit(views, func(w io.Writer) {
				rows := make([][]string, 0, len(views))
				for _, v := range views {
					rows = append(rows, []string{v.Kid, v.Alg, v.State, stamp(v.CreatedAt), stamp(v.ActivatedAt), stamp(v.RetiredAt)})
				}
				table(w, []string{"KID", "ALG", "STATE", "CREATED", "ACTIVATED", "RETIRED"}, rows)
				if len(views) == 0 {
					fmt.Fprintln(w, "(no keys yet: the server or 'authctl keys rotate' creates the first)")
				}
			})
		},
	}
}

// sortKeys orders keys as an operator reads them: current, next, retired, deleted; within a
// state by algorithm (keys.Algs order), newest first.
func sortKeys(in []oauth.SigningKey) []oauth.SigningKey {
	rank := map[string]int{oauth.KeyCurrent: 0, oauth.KeyNext: 1, oauth.KeyRetired: 2, oauth.KeyDeleted: 3}
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b oauth.SigningKey) int {
		if d := rank[a.State] - rank[b.State]; d != 0 {
			return d
		}
		if d := slices.Index(keys.Algs, a.Algorithm()) - slices.Index(keys.Algs, b.Algorithm()); d != 0 {
			return d
		}
		return b.CreatedAt.Compare(a.CreatedAt)
	})
	return out
}

func (c *cli) keysRotate() *cobra.Command {
	var ifDue bool
	cmd := &cobra.Command{
		Use:   "rotate [--if-due]",
		Short: "Rotate the signing keys now",
		Long: `Rotate now: the current key's period is treated as over, so a next key that has been
published long enough (longer than the JWKS cache lifetime) becomes current and the current one
retires. A next key is never promoted before that, so that verifiers have it cached: if none is
ripe, this run creates one (or reports the one waiting) and a later run promotes it.

With --if-due it makes only the transitions due now, as the scheduled rotation does. On a fresh
store it creates the first signing key. Against DynamoDB it needs the service's key backend
(--key-backend kms, or a local key only with DynamoDB Local).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := c.config()
			if err != nil {
				return err
			}
			if cfg.Store == "dynamodb" && cfg.KeyBackend == "local" && cfg.DynamoEndpoint == "" {
				return usagef("refusing to register a local key file in the DynamoDB table %s: the deployed functions could not sign with it; use --key-backend kms (or --endpoint for DynamoDB Local)", cfg.Table)
			}
			a, err := c.openApp(cmd.Context())
			if err != nil {
				return err
			}
			r := a.Rotator()
			var rep keys.Report
			if ifDue {
				rep, err = r.Rotate(cmd.Context())
			} else {
				rep, err = r.Promote(cmd.Context())
			}
			if err != nil {
				return fmt.Errorf("rotate keys: %w", err)
			}
			return c.emit(rep, func(w io.Writer) {
				if !rep.Changed {
					fmt.Fprintln(w, "nothing was due; no change")
				}
				line := func(k, v string) {
					if v != "" {
						fmt.Fprintf(w, "%-15s %s\n", k+":", v)
					}
				}
				line("created", strings.Join(rep.Created, " "))
				line("promoted", strings.Join(rep.Promoted(), " "))
				line("retired", strings.Join(rep.Retired, " "))
				line("deleted", strings.Join(rep.Deleted, " "))
				for _, alg := range keys.Algs {
					a, ok := rep.Algs[alg]
					if !ok {
						continue
					}
					line(alg+" current", a.Current)
					line(alg+" next", a.Next)
					if !a.NextRotation.IsZero() {
						line(alg+" rotates", stamp(a.NextRotation))
					}
					if !ifDue && a.Promoted == "" && a.Next != "" {
						fmt.Fprintf(w, "The next %s key %s is not yet published long enough to sign; run again after the JWKS cache lifetime (AUTH_JWKS_MAX_AGE) has passed since its creation.\n", alg, a.Next)
					}
				}
			})
		},
	}
	cmd.Flags().BoolVar(&ifDue, "if-due", false, "only make the transitions due now (what the scheduled rotation does)")
	return cmd
}

func (c *cli) keysJWKS() *cobra.Command {
	return &cobra.Command{
		Use:   "jwks",
		Short: "Print the JWKS the service publishes (public keys only)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, _, err := c.openStore(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			set, err := st.Keys(cmd.Context())
			if err != nil {
				return fmt.Errorf("read the key registry: %w", err)
			}
			body, _ := keys.PublicJWKS(set)
			var out bytes.Buffer
			if err := json.Indent(&out, body, "", "  "); err != nil {
				return fmt.Errorf("format the jwks: %w", err)
			}
			out.WriteByte('\n')
			_, err = c.std.out.Write(out.Bytes())
			return err
		},
	}
}
