package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until its issue lands; the file is replaced whole.
func newCheckConnectCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "connect",
		Short: "(connect: not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("connect is not built yet")
		},
	}
}
