package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/fsync"
	"github.com/fleet-role/fleet-role/internal/settings"
)

func newCheckFsyncCommand() *cobra.Command {
	var (
		dir    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "fsync [--dir DIR]",
		Short: "Time fdatasync as etcd's documented fio disk check does, natively",
		Long: `Takes the disk reading etcd's documentation points to (fio --rw=write
--ioengine=sync --fdatasync=1 --size=22m --bs=2300), without fio: lays out a
temporary file in --dir, writes 22 MiB to it in 2300-byte blocks with an
fdatasync after each, and prints the p50, p99 and maximum fdatasync latency.
etcd's limit for a WAL fsync p99 is 10 ms (docs/facts.md): the reading is
judged fit when its p99 is under it, unfit otherwise (exit 3), and not
judged on a memory filesystem.

The filesystem is named from statfs. On tmpfs or another memory filesystem
fdatasync reaches no disk, and the reading says so (measured_disk false).
The file is removed afterwards, also on Ctrl-C or SIGTERM.

Point --dir at the disk etcd's data would live on (k3s: under
/var/lib/rancher/k3s/server). The default is /var/tmp, which stays on a disk
where /tmp is often tmpfs. A run takes a few seconds on a fast disk and
10029 x the fdatasync time on a slow one.`,
		Example: `  fleet-role check fsync --dir /var/lib/rancher/k3s/server
  fleet-role check fsync --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageErrorf("--dir is empty: give the directory to measure")
			}
			ctx, stop := signal.NotifyContext(commandContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			r, err := fsync.Measure(ctx, fsync.Options{Dir: dir})
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("%w (%v; the file was removed)", err, context.Cause(ctx))
				}
				return err
			}
			v := fsyncVerdict(r)
			out := struct {
				fsync.Reading
				Judged checkVerdict `json:"judged"`
			}{r, v}
			return printJudged(cmd.OutOrStdout(), asJSON, out, v, func(w io.Writer) error {
				return writeFsync(w, r, v)
			})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", fsync.DefaultDir, "directory to write the temporary file in: the disk etcd's data would live on")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// fsyncVerdict holds the reading's p99 to etcd's disk check, as the
// decision holds a standby's (settings.FdatasyncLimit); a memory
// filesystem measures no disk and is not judged, as the decision does not
// hold it against a host.
func fsyncVerdict(r fsync.Reading) checkVerdict {
	l := settings.Defaults().FdatasyncLimit()
	if !r.MeasuredDisk {
		return notJudged(l, fmt.Sprintf("%s is a memory filesystem (%s): fdatasync reached no disk", r.Dir, r.Filesystem))
	}
	return judge(l, "fdatasync p99", r.P99Seconds)
}

func writeFsync(w io.Writer, r fsync.Reading, v checkVerdict) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	disk := "a disk"
	if !r.MeasuredDisk {
		disk = "memory, no disk measured"
	}
	fmt.Fprintf(tw, "dir\t%s\n", r.Dir)
	fmt.Fprintf(tw, "filesystem\t%s (%s)\n", r.Filesystem, disk)
	fmt.Fprintf(tw, "writes\t%d of %d bytes, fdatasync after each\n", r.Writes, r.BlockBytes)
	fmt.Fprintf(tw, "fdatasync\tp50 %s  p99 %s  max %s\n", fsyncLatency(r.P50Seconds), fsyncLatency(r.P99Seconds), fsyncLatency(r.MaxSeconds))
	fmt.Fprintf(tw, "elapsed\t%.2f s\n", r.ElapsedSeconds)
	if r.Note != "" {
		fmt.Fprintf(tw, "note\t%s\n", r.Note)
	}
	if r.Cut != "" {
		fmt.Fprintf(tw, "cut\t%s: the figures are those of the writes made\n", r.Cut)
	}
	v.write(tw)
	return tw.Flush()
}

// fsyncLatency prints a latency to four significant figures or so, in the unit
// that suits it: a disk's take milliseconds, tmpfs's a few hundred nanoseconds.
func fsyncLatency(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d >= time.Millisecond:
		d = d.Round(time.Microsecond)
	case d >= time.Microsecond:
		d = d.Round(100 * time.Nanosecond)
	}
	return d.String()
}
