package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// k3sDropIn is where the rendered k3s configuration goes on a host. k3s reads
// config.yaml, then every *.yaml in config.yaml.d in lexical order; a key
// ending in "+" appends to the value earlier files gave it instead of
// replacing it (k3s pkg/configfilearg).
const k3sDropIn = "/etc/rancher/k3s/config.yaml.d/fleet-role.yaml"

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
	var sf *settings.Flags
	cmd := &cobra.Command{
		Use:   "k3s-config --eligible=BOOL --pinned=BOOL",
		Short: "Print the k3s configuration drop-in that labels this host eligible and pinned, or not",
		Long: `Prints the k3s configuration drop-in for one host, for
` + k3sDropIn + `. It writes both labels, each true or
false: a kubelet never removes a label its configuration stops naming, so a
label that must be able to turn off is written false, never left out. It uses
node-label+ so that it adds to the node-label entries of other configuration
files instead of replacing them. k3s applies the labels when it next starts.

Labels under node-restriction.kubernetes.io/ (the hardened keys docs/install.md
recommends) cannot be written this way: a kubelet may not set them on its own
node, so a compromised node cannot mark itself either. Set those with kubectl
label node; with them in the settings this command refuses (exit 2).`,
		Example: "  fleet-role render k3s-config --eligible=true --pinned=false | sudo tee " + k3sDropIn,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, name := range []string{"eligible", "pinned"} {
				if !cmd.Flags().Changed(name) {
					return usageErrorf("--%s=true|false is required: both labels are always written", name)
				}
			}
			// The label keys are the settings' (eligible_label and
			// pinned_label), from the same file the probe and controller
			// read, so that the labels written are the labels read.
			set, err := loadSettings(sf)
			if err != nil {
				return err
			}
			eligibleLabel, pinnedLabel := set.EligibleLabel, set.PinnedLabel
			if eligibleLabel == pinnedLabel {
				return usageErrorf("eligible_label and pinned_label are both %q", eligibleLabel)
			}
			// A kubelet refuses keys under node-restriction.kubernetes.io/ in
			// its --node-labels, and k3s passes --node-label on to it: such a
			// drop-in would keep k3s from starting.
			for _, l := range []struct{ name, key string }{{"eligible_label", eligibleLabel}, {"pinned_label", pinnedLabel}} {
				if settings.AdminOnlyLabel(l.key) {
					return usageErrorf("%s %q is under %s, which a kubelet may not set on its own node (k3s's --node-label passes it to the kubelet, which refuses it): set it with kubectl label node NODE %s=true|false instead", l.name, l.key, settings.NodeRestrictionPrefix, l.key)
				}
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), k3sConfig(eligibleLabel, eligible, pinnedLabel, pinned))
			return err
		},
	}
	cmd.Flags().BoolVar(&eligible, "eligible", false, "whether this host may hold an etcd vote (required)")
	cmd.Flags().BoolVar(&pinned, "pinned", false, "whether this host, as a voter, is never swapped out (required)")
	// The label keys the drop-in writes; the other settings do not apply.
	sf = settings.AddFlagsOf(cmd.Flags(), "eligible_label", "pinned_label")
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
