package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until its issue lands; the file is replaced whole.
func newControllerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "controller",
		Short: "(controller: not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("controller is not built yet")
		},
	}
}
