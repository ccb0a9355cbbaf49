package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
)

// k3sDropIn is where the rendered k3s configuration goes on a host. k3s reads
// config.yaml, then every *.yaml in config.yaml.d in lexical order; a key
// ending in "+" appends to the value earlier files gave it instead of
// replacing it (k3s pkg/configfilearg).
const k3sDropIn = "/etc/rancher/k3s/config.yaml.d/fleet-role.yaml"

// Default label keys, matching the settings' defaults (eligible_label and
// pinned_label in the fleet-role-settings ConfigMap).
const (
	defaultEligibleLabel = "fleet-role.io/voter-eligible"
	defaultPinnedLabel   = "fleet-role.io/voter-pinned"
)

func newRenderCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print configuration for a host",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newRenderK3sConfigCommand())
	return cmd
}

func newRenderK3sConfigCommand() *cobra.Command {
	var eligible, pinned bool
	var eligibleLabel, pinnedLabel string
	cmd := &cobra.Command{
		Use:   "k3s-config --eligible=BOOL --pinned=BOOL",
		Short: "Print the k3s configuration drop-in that labels this host eligible and pinned, or not",
		Long: `Prints the k3s configuration drop-in for one host, for
` + k3sDropIn + `. It writes both labels, each true or
false: a kubelet never removes a label its configuration stops naming, so a
label that must be able to turn off is written false, never left out. It uses
node-label+ so that it adds to the node-label entries of other configuration
files instead of replacing them. k3s applies the labels when it next starts.`,
		Example: "  fleet-role render k3s-config --eligible=true --pinned=false | sudo tee " + k3sDropIn,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, name := range []string{"eligible", "pinned"} {
				if !cmd.Flags().Changed(name) {
					return usageErrorf("--%s=true|false is required: both labels are always written", name)
				}
			}
			for _, l := range []struct{ flag, key string }{{"eligible-label", eligibleLabel}, {"pinned-label", pinnedLabel}} {
				if errs := validation.IsQualifiedName(l.key); len(errs) > 0 {
					return usageErrorf("--%s=%q is not a label key: %s", l.flag, l.key, strings.Join(errs, "; "))
				}
			}
			if eligibleLabel == pinnedLabel {
				return usageErrorf("--eligible-label and --pinned-label are both %q", eligibleLabel)
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), k3sConfig(eligibleLabel, eligible, pinnedLabel, pinned))
			return err
		},
	}
	cmd.Flags().BoolVar(&eligible, "eligible", false, "whether this host may hold an etcd vote (required)")
	cmd.Flags().BoolVar(&pinned, "pinned", false, "whether this host, as a voter, is never swapped out (required)")
	cmd.Flags().StringVar(&eligibleLabel, "eligible-label", defaultEligibleLabel, "node label key that marks a host eligible")
	cmd.Flags().StringVar(&pinnedLabel, "pinned-label", defaultPinnedLabel, "node label key that pins a voter")
	return cmd
}

// k3sConfig is the drop-in's text.
func k3sConfig(eligibleLabel string, eligible bool, pinnedLabel string, pinned bool) string {
	return fmt.Sprintf(`# fleet-role's node labels for this host. Goes in %s;
# k3s applies it when it next starts (systemctl restart k3s, or k3s-agent).
# Both labels are written, true or false: a kubelet never removes a label its
# configuration stops naming, so a label turned off must be written false.
# "node-label+" adds to the node-label entries of other files, not replaces them.
node-label+:
  - %s=%s
  - %s=%s
`, k3sDropIn, eligibleLabel, strconv.FormatBool(eligible), pinnedLabel, strconv.FormatBool(pinned))
}
