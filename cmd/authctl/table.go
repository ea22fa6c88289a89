package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/acmebank/authserver/shared/store/dynamo"
)

func (c *cli) tableCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "table",
		Short: "Create the DynamoDB table for local use",
		RunE:  groupRun,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "create --table NAME --endpoint URL",
		Short: "Create the service's table (with TTL) in DynamoDB Local; idempotent",
		Long: `Create the service's table, with its indexes and TTL, in DynamoDB Local, and wait until it is
active. It is idempotent: an existing table is left as it is. The deployed table is created by
the SAM template, so an --endpoint (or AUTH_DYNAMODB_ENDPOINT) is required.`,
		Example: `  authctl table create --table auth-local --endpoint http://127.0.0.1:8000
  export AUTH_STORE=dynamodb AUTH_TABLE=auth-local AUTH_DYNAMODB_ENDPOINT=http://127.0.0.1:8000`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.table == "" {
				return usagef("table create needs --table (or %s)", "AUTH_TABLE")
			}
			if c.endpoint == "" {
				return usagef("table create is for DynamoDB Local and needs --endpoint (or AUTH_DYNAMODB_ENDPOINT); the deployed table comes from the SAM template")
			}
			client, err := dynamo.NewClient(cmd.Context(), c.endpoint)
			if err != nil {
				return fmt.Errorf("dynamodb client: %w", err)
			}
			if err := dynamo.CreateTable(cmd.Context(), client, c.table); err != nil {
				return err
			}
			res := struct {
				Table    string `json:"table"`
				Endpoint string `json:"endpoint"`
				Active   bool   `json:"active"`
			}{c.table, c.endpoint, true}
			return c.emit(res, func(w io.Writer) { fmt.Fprintf(w, "table %s is active at %s\n", c.table, c.endpoint) })
		},
	})
	return cmd
}
