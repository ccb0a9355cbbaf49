package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// newCheckCommand groups the one-shot readings. Each takes one reading of
// this host, prints it and exits, touching no cluster.
func newCheckCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Take one reading of this host by hand and print it, touching no cluster",
		Long: `Each subcommand takes one of the readings the probe takes every period, prints
it and exits. Nothing is written to any cluster. Exit 0 when the reading was
taken, 1 when it could not be (the error says what and where), 2 for a usage
error. Each also judges its reading against the limit the decision holds
that signal to, printing the limit and its basis, and exits 3 when it is
unfit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("check needs a reading: link, connect, memory, etcd, fsync, wakeup, or all (see fleet-role check --help)")
		},
	}
	cmd.AddCommand(
		newCheckLinkCommand(),
		newCheckConnectCommand(),
		newCheckMemoryCommand(),
		newCheckEtcdCommand(),
		newCheckFsyncCommand(),
		newCheckWakeupCommand(),
		newCheckAllCommand(),
	)
	return cmd
}

// printReading writes v as one indented JSON object when asJSON is set, and
// otherwise calls human to write the readable form. Every check prints
// through it so that --json behaves the same everywhere.
func printReading(w io.Writer, asJSON bool, v any, human func(io.Writer) error) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("encode reading: %w", err)
		}
		return nil
	}
	return human(w)
}
