package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

func (c *cli) storeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Maintain the embedded store's data file",
		RunE:  groupRun,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "compact",
		Short: "Give the space of deleted and expired items back: rewrite the embedded store's file",
		Long: `Rewrite the embedded store's data file (auth.db under --data) with only its live items, and
print its size before and after. A bbolt file never shrinks by itself: the pages of deleted
and expired items are reused by later writes, but the file keeps the size of its busiest
moment (a flood of authorization requests, say). Compaction deletes the expired items, copies
the rest into a new file with bbolt's Compact, checks it and renames it over the old one.

The local server must be stopped: while it holds the file, compact refuses and changes nothing.
DynamoDB needs no compaction (its TTL deletes expired items).`,
		Example: `  authctl store compact --data data`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := c.config()
			if err != nil {
				return err
			}
			if cfg.Store == "dynamodb" {
				return usagef("store compact is for the embedded store; DynamoDB needs none")
			}
			path := filepath.Join(cfg.DataDir, embedded.FileName)
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no embedded store at %s (check --data or AUTH_DATA_DIR): %w", path, oauth.ErrNotFound)
			}
			res, err := embedded.Compact(cfg.DataDir, time.Now())
			if errors.Is(err, embedded.ErrLocked) {
				return fmt.Errorf("the embedded store %s is in use by another process (the local server?): stop it first; nothing was changed", path)
			}
			if err != nil {
				return err
			}
			out := struct {
				File   string `json:"file"`
				Before int64  `json:"bytes_before"`
				After  int64  `json:"bytes_after"`
			}{path, res.Before, res.After}
			return c.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "compacted %s: %s -> %s\n", path, mib(res.Before), mib(res.After))
			})
		},
	})
	return cmd
}

// mib renders a size in MiB.
func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
