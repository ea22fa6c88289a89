package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/oauth"
)

func (c *cli) grantsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "grants",
		Aliases: []string{"grant"},
		Short:   "List and revoke grants (what a user authorised a client to do)",
		Long: `A grant is what a user authorised a client to do; its code, access tokens and refresh
tokens all belong to it, and revoking it ends all of them at once.`,
		RunE: groupRun,
	}
	cmd.AddCommand(c.grantsList(), c.grantsShow(), c.grantsRevoke(), c.grantsRevokeAll())
	return cmd
}

// ownerFlags select a user's or a client's grants.
type ownerFlags struct{ user, client string }

func (o *ownerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.user, "user", "", "the user's uid or username")
	cmd.Flags().StringVar(&o.client, "client", "", "the client_id")
}

// filter checks that the owner exists (a typo would otherwise look like "no grants") and
// returns the store's filter.
func (o *ownerFlags) filter(ctx context.Context, adm *admin.Service) (oauth.GrantFilter, error) {
	switch {
	case (o.user == "") == (o.client == ""):
		return oauth.GrantFilter{}, usagef("give exactly one of --user or --client")
	case o.user != "":
		u, err := adm.FindUser(ctx, o.user)
		if err != nil {
			return oauth.GrantFilter{}, err
		}
		return oauth.GrantFilter{UID: u.UID}, nil
	default:
		if _, err := adm.GetClient(ctx, o.client); err != nil {
			return oauth.GrantFilter{}, err
		}
		return oauth.GrantFilter{ClientID: o.client}, nil
	}
}

func (c *cli) grantsList() *cobra.Command {
	var o ownerFlags
	cmd := &cobra.Command{
		Use:     "list --user USER | --client CLIENT_ID",
		Short:   "List the live grants of a user or of a client",
		Example: "  authctl grants list --user alice\n  authctl grants list --client cl_x -o json",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			f, err := o.filter(cmd.Context(), adm)
			if err != nil {
				return err
			}
			list, err := adm.ListGrants(cmd.Context(), f)
			if err != nil {
				return err
			}
			views := make([]grantView, 0, len(list))
			for _, r := range list {
				views = append(views, viewGrant(r))
			}
			return c.emit(views, func(w io.Writer) {
				rows := make([][]string, 0, len(views))
				for _, v := range views {
					rows = append(rows, []string{v.ID, v.ClientID, v.UID, strings.Join(v.Scopes, " "), detailTypes(v.AuthorizationDetails),
						stamp(v.CreatedAt), stamp(v.LastUsedAt), stamp(v.ExpiresAt)})
				}
				table(w, []string{"GRANT_ID", "CLIENT_ID", "UID", "SCOPES", "DETAILS", "CREATED", "LAST_USED", "EXPIRES"}, rows)
			})
		},
	}
	o.register(cmd)
	return cmd
}

func (c *cli) grantsShow() *cobra.Command {
	return &cobra.Command{
		Use:     "show GRANT_ID",
		Short:   "Show one grant: client, user, scopes, dates and its authorization details",
		Example: "  authctl grants show gr_8Hk2…\n  authctl grants show gr_8Hk2… -o json",
		Args:    exactArgs("GRANT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			rec, err := adm.GetGrant(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := viewGrant(rec)
			return c.emit(v, func(w io.Writer) {
				state := "live"
				switch {
				case v.Revoked:
					state = "revoked"
				case !v.ConsumedAt.IsZero():
					state = "payment used " + stamp(v.ConsumedAt)
				}
				rows := [][]string{{"GRANT_ID", v.ID}, {"CLIENT_ID", v.ClientID}, {"UID", v.UID}, {"SCOPES", strings.Join(v.Scopes, " ")},
					{"STATE", state}, {"CREATED", stamp(v.CreatedAt)}, {"AUTH_TIME", stamp(v.AuthTime)}, {"LAST_USED", stamp(v.LastUsedAt)},
					{"EXPIRES", stamp(v.ExpiresAt)}, {"LIVE_TOKENS", fmt.Sprint(v.LiveTokens)}}
				table(w, []string{"FIELD", "VALUE"}, rows)
				if len(v.AuthorizationDetails) > 0 {
					fmt.Fprintf(w, "\nAUTHORIZATION_DETAILS\n%s\n", prettyJSON(v.AuthorizationDetails))
				}
			})
		},
	}
}

// detailTypes names the types of a grant's authorization details, for the listing ("-" for
// none, "?" for details that do not read).
func detailTypes(details json.RawMessage) string {
	if len(details) == 0 {
		return "-"
	}
	var list []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(details, &list) != nil {
		return "?"
	}
	types := make([]string, 0, len(list))
	for _, d := range list {
		types = append(types, d.Type)
	}
	return strings.Join(types, ",")
}

// prettyJSON indents raw JSON for reading; what does not parse is shown as it is.
func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

func (c *cli) grantsRevoke() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke GRANT_ID",
		Short: "Revoke one grant: its access and refresh tokens fail at once",
		Args:  exactArgs("GRANT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			already, err := adm.RevokeGrant(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res := struct {
				ID             string `json:"id"`
				Revoked        bool   `json:"revoked"`
				AlreadyRevoked bool   `json:"already_revoked"`
			}{args[0], true, already}
			return c.emit(res, func(w io.Writer) {
				if already {
					fmt.Fprintf(w, "grant %s was already revoked\n", args[0])
				} else {
					fmt.Fprintf(w, "grant %s revoked\n", args[0])
				}
			})
		},
	}
}

func (c *cli) grantsRevokeAll() *cobra.Command {
	var o ownerFlags
	cmd := &cobra.Command{
		Use:     "revoke-all --user USER | --client CLIENT_ID",
		Short:   "Revoke every grant of a user or of a client",
		Example: "  authctl grants revoke-all --user alice\n  authctl grants revoke-all --client cl_x",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			f, err := o.filter(cmd.Context(), adm)
			if err != nil {
				return err
			}
			revoked, err := adm.RevokeAll(cmd.Context(), f, admin.ReasonOperator)
			if err != nil && len(revoked) == 0 {
				return err
			}
			res := struct {
				RevokedGrants []string `json:"revoked_grants"`
			}{nonNil(revoked)}
			if eerr := c.emit(res, func(w io.Writer) { fmt.Fprintf(w, "%d grant(s) revoked\n", len(revoked)) }); eerr != nil {
				return eerr
			}
			return partial(err)
		},
	}
	o.register(cmd)
	return cmd
}
