package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func (c *cli) registrationCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registration",
		Short: "Dynamic client registration (RFC 7591): initial access tokens for third parties",
		Long: `A third party registers its client itself at the registration endpoint (AUTH_REGISTRATION=on)
with an initial access token issued here, or with a software statement of a directory the
deployment trusts (AUTH_REGISTRATION_DIRECTORIES). Registration is never open.`,
		RunE: groupRun,
	}
	token := &cobra.Command{Use: "token", Short: "Initial access tokens", RunE: groupRun}
	token.AddCommand(c.registrationTokenCreate())
	cmd.AddCommand(token)
	return cmd
}

// createdInitialAccessToken is the JSON output of registration token create: the only time the
// token is shown.
type createdInitialAccessToken struct {
	InitialAccessToken string    `json:"initial_access_token"`
	Profile            string    `json:"profile,omitempty"`
	ExpiresAt          time.Time `json:"expires_at"`
}

func (c *cli) registrationTokenCreate() *cobra.Command {
	var ttl time.Duration
	var profile string
	cmd := &cobra.Command{
		Use:   "create [--ttl 24h] [--profile fapi2]",
		Short: "Issue a single-use initial access token; prints it once",
		Long: `Issues an initial access token (iat_..., or iat-fapi2_... with --profile fapi2): it registers one
client, within its lifetime, and is then spent. With --profile fapi2 the client it registers is held
to the FAPI 2.0 profile whatever its metadata say. The store keeps only its SHA-256 hash.`,
		Example: "  authctl registration token create --ttl 24h --profile fapi2",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, err := c.admin(cmd.Context(), newStoreAllowed)
			if err != nil {
				return err
			}
			tok, exp, err := adm.CreateInitialAccessToken(cmd.Context(), ttl, profile, c.cfg.HomeRegion)
			if err != nil {
				return err
			}
			err = c.emit(createdInitialAccessToken{InitialAccessToken: tok, Profile: profile, ExpiresAt: exp}, func(w io.Writer) {
				fmt.Fprintf(w, "initial_access_token: %s\nexpires_at:           %s\n", tok, exp.Format(time.RFC3339))
			})
			c.note("The initial access token is shown only now: the store keeps its hash. It registers one client.")
			return err
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token may be used (at most 720h)")
	cmd.Flags().StringVar(&profile, "profile", "", "security profile of the client it registers: empty or fapi2")
	return cmd
}
