package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/memory"
	"github.com/fleet-role/fleet-role/internal/settings"
)

func newCheckMemoryCommand() *cobra.Command {
	var (
		hostRoot string
		asJSON   bool
		sf       *settings.Flags
	)
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "MemTotal and MemAvailable, and the memory pressure (PSI) of this host",
		Long: `Reads MemTotal and MemAvailable from /proc/meminfo (in bytes) and the memory
pressure from /proc/pressure/memory: the share of time in which some, or all
non-idle, tasks stalled waiting for memory, averaged over 10, 60 and 300
seconds, and the total stall time since boot in microseconds. A kernel without
memory PSI reads as absent (psi null in --json), never as zero.

MemAvailable is judged against the decision's limit: at least the storage
quota (--storage-quota-bytes, etcd's default 2 GiB), since etcd's backend is
memory-mapped. Exit 3 when it is under. (The stall is judged by the probe
as what a period gained, which one reading cannot give.)`,
		Example: `  fleet-role check memory
  fleet-role check memory --host-root /host --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hostRoot == "" {
				return usageErrorf("--host-root is empty: give the directory the host's / is at (/ on the host itself)")
			}
			set, err := sf.Load(os.LookupEnv)
			if err != nil {
				return usageError(err)
			}
			r, err := memory.Read(hostRoot)
			if err != nil {
				return fmt.Errorf("memory reading: %w", err)
			}
			v := judge(set.MemoryLimit(set.StorageQuotaBytes, false), "memory_available", float64(r.MemAvailableBytes))
			out := struct {
				memory.Reading
				Judged checkVerdict `json:"judged"`
			}{r, v}
			return printJudged(cmd.OutOrStdout(), asJSON, out, v, func(w io.Writer) error {
				return writeMemory(w, r, v)
			})
		},
	}
	// The memory limit is the storage quota.
	sf = settings.AddFlagsOf(cmd.Flags(), "storage_quota_bytes")
	cmd.Flags().StringVar(&hostRoot, "host-root", "/", "`DIR` where the host's root is mounted; proc is read under it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func writeMemory(w io.Writer, r memory.Reading, v checkVerdict) error {
	const gib = 1 << 30
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "mem_total\t%.1f GiB (%d bytes)\n", float64(r.MemTotalBytes)/gib, r.MemTotalBytes)
	share := 0.0
	if r.MemTotalBytes > 0 {
		share = 100 * float64(r.MemAvailableBytes) / float64(r.MemTotalBytes)
	}
	fmt.Fprintf(tw, "mem_available\t%.1f GiB (%d bytes, %.1f%% of total)\n", float64(r.MemAvailableBytes)/gib, r.MemAvailableBytes, share)
	if r.PSI == nil {
		fmt.Fprintf(tw, "psi\tabsent (this kernel serves no memory pressure: built without PSI, or booted with psi=0)\n")
		v.write(tw)
		return tw.Flush()
	}
	for _, l := range []struct {
		name string
		v    memory.PSILine
	}{{"psi some", r.PSI.Some}, {"psi full", r.PSI.Full}} {
		fmt.Fprintf(tw, "%s\tavg10 %.2f%%  avg60 %.2f%%  avg300 %.2f%%  total %d µs stalled since boot\n", l.name, l.v.Avg10, l.v.Avg60, l.v.Avg300, l.v.TotalUs)
	}
	v.write(tw)
	return tw.Flush()
}
