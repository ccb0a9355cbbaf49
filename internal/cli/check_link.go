package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/link"
)

func newCheckLinkCommand() *cobra.Command {
	var (
		hostRoot string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "link",
		Short: "Which interface the default route leaves by, and whether its link is wired, Wi-Fi or unknown",
		Long: `Reads the default route from /proc/net/route (or /proc/net/ipv6_route when
IPv4 has none; the lowest metric wins) and walks /sys from its interface down
through bridges, bonds, VLANs and other stacked devices to the physical
device(s) beneath. The class is wifi when a device on the way is Wi-Fi (a
bond's worst member decides), wired when it reaches a physical device that is
not, and unknown when no physical device can be seen (a TUN, WireGuard or veth
interface); the reason names the interface that decided or stopped the walk.

/proc/net is the reading process's own network namespace: run it on the host,
or in a pod with the host's network.`,
		Example: `  fleet-role check link
  fleet-role check link --host-root /host --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hostRoot == "" {
				return usageErrorf("--host-root is empty: give the directory the host's / is at (/ on the host itself)")
			}
			r, err := link.Read(hostRoot)
			if err != nil {
				return fmt.Errorf("link reading: %w", err)
			}
			v := linkVerdict(r)
			out := struct {
				link.Reading
				Judged checkVerdict `json:"judged"`
			}{r, v}
			return printJudged(cmd.OutOrStdout(), asJSON, out, v, func(w io.Writer) error {
				return writeLink(w, r, v)
			})
		},
	}
	cmd.Flags().StringVar(&hostRoot, "host-root", "/", "`DIR` where the host's root is mounted; proc and sys are read under it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func writeLink(w io.Writer, r link.Reading, v checkVerdict) error {
	route := r.Family + " default route"
	if r.Gateway != "" {
		route += " via " + r.Gateway
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "interface\t%s (%s, metric %d)\n", r.Interface, route, r.Metric)
	fmt.Fprintf(tw, "class\t%s\n", r.Class)
	fmt.Fprintf(tw, "via\t%s\n", strings.Join(r.Via, " -> "))
	fmt.Fprintf(tw, "reason\t%s\n", r.Reason)
	v.write(tw)
	return tw.Flush()
}
