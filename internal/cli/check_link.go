package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until its issue lands; the file is replaced whole.
func newCheckLinkCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "link",
		Short: "(link: not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("link is not built yet")
		},
	}
}
