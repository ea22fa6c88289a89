package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acmebank/authserver/shared/oauth"
)

// usersFactors is `authctl users factors`: a user's second factors, listed, removed one by
// one, or reset.
func (c *cli) usersFactors() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "factors",
		Short: "List, remove or reset a user's second factors (passkeys, authenticator app)",
		Long: `A user's second factors for strong customer authentication: passkeys, and the
authenticator app with its recovery codes. Operators see what each factor is and when it was
last used, never a secret. Remove one that is lost; reset all of them once the bank has checked
who the user is by other means: the next sign-in that needs strong authentication sets one up.`,
		RunE: groupRun,
	}
	cmd.AddCommand(c.factorsList(), c.factorsRemove(), c.factorsReset())
	return cmd
}

// factorView is one factor as operators see it.
type factorView struct {
	ID            string     `json:"id"`
	Kind          string     `json:"kind"`
	CreatedAt     time.Time  `json:"created_at"`
	LastUsedAt    *time.Time `json:"last_used_at,omitempty"`
	RecoveryCodes int        `json:"recovery_codes_left,omitempty"`
}

type factorsView struct {
	UID            string       `json:"uid"`
	Username       string       `json:"username"`
	Factors        []factorView `json:"factors"`
	LastStrongAuth *time.Time   `json:"last_strong_auth,omitempty"`
}

func viewFactors(u oauth.User, f oauth.UserFactors) factorsView {
	v := factorsView{UID: u.UID, Username: u.Username, Factors: []factorView{}}
	if !f.LastStrongAuth.IsZero() {
		t := f.LastStrongAuth.UTC()
		v.LastStrongAuth = &t
	}
	for _, x := range f.Factors {
		fv := factorView{ID: x.ID, Kind: x.Kind, CreatedAt: x.CreatedAt.UTC(), RecoveryCodes: len(x.RecoveryHashes)}
		if !x.LastUsedAt.IsZero() {
			t := x.LastUsedAt.UTC()
			fv.LastUsedAt = &t
		}
		v.Factors = append(v.Factors, fv)
	}
	return v
}

func (v factorsView) text(w io.Writer) {
	if len(v.Factors) == 0 {
		fmt.Fprintf(w, "user %s (%s) has no second factor\n", v.Username, v.UID)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FACTOR_ID\tKIND\tCREATED\tLAST_USED\tRECOVERY_CODES_LEFT")
	for _, f := range v.Factors {
		last := "never"
		if f.LastUsedAt != nil {
			last = stamp(*f.LastUsedAt)
		}
		codes := "-"
		if f.Kind == oauth.FactorTOTP {
			codes = fmt.Sprint(f.RecoveryCodes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.ID, f.Kind, stamp(f.CreatedAt), last, codes)
	}
	tw.Flush()
}

func (c *cli) factorsList() *cobra.Command {
	return &cobra.Command{
		Use:   "list USER",
		Short: "List a user's second factors",
		Args:  exactArgs("USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			u, f, err := adm.UserFactors(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := viewFactors(u, f)
			return c.emit(v, v.text)
		},
	}
}

func (c *cli) factorsRemove() *cobra.Command {
	return &cobra.Command{
		Use:   "remove USER FACTOR_ID",
		Short: "Remove one of a user's second factors (the app's recovery codes go with it)",
		Args:  exactArgs("USER", "FACTOR_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			if _, err := adm.RemoveFactor(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			u, f, err := adm.UserFactors(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := viewFactors(u, f)
			return c.emit(v, v.text)
		},
	}
}

func (c *cli) factorsReset() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "reset USER --yes",
		Short: "Remove every second factor of a user",
		Args:  exactArgs("USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usagef("resetting the factors of %s cannot be undone: confirm with --yes", args[0])
			}
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			u, n, err := adm.ResetFactors(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := factorsView{UID: u.UID, Username: u.Username, Factors: []factorView{}}
			return c.emit(v, func(w io.Writer) { fmt.Fprintf(w, "user %s (%s): %d factor(s) removed\n", u.Username, u.UID, n) })
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm")
	return cmd
}
