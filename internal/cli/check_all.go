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

	"github.com/fleet-role/fleet-role/internal/connect"
	"github.com/fleet-role/fleet-role/internal/fsync"
	"github.com/fleet-role/fleet-role/internal/link"
	"github.com/fleet-role/fleet-role/internal/memory"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/wakeup"
)

// allRow is one reading of check all: its name, and its verdict or why it
// could not be taken.
type allRow struct {
	Reading string        `json:"reading"`
	Judged  *checkVerdict `json:"judged,omitempty"`
	Err     string        `json:"error,omitempty"`
}

// allReport is check all's answer: one verdict for the host, and each
// reading's.
type allReport struct {
	Verdict  string   `json:"verdict"`
	Readings []allRow `json:"readings"`
}

// linkVerdict judges the default route's class as the decision does
// (docs/limits.md, link): Wi-Fi is unfit, wired fit, and a class that cannot
// be seen is reported, not held against the host.
func linkVerdict(r link.Reading) checkVerdict {
	const basis = "wifi is unfit: Wi-Fi's retransmissions and power saving delay frames past a heartbeat"
	switch r.Class {
	case link.WiFi:
		return checkVerdict{Verdict: checkUnfit, Basis: basis, Why: fmt.Sprintf("the default route leaves by %s, a Wi-Fi interface", r.Interface)}
	case link.Wired:
		return checkVerdict{Verdict: checkFit, Basis: basis, Why: fmt.Sprintf("the default route leaves by %s, wired", r.Interface)}
	}
	return checkVerdict{Verdict: checkNotJudged, Basis: basis, Why: fmt.Sprintf("the link of %s cannot be seen: reported, not held against the host", r.Interface)}
}

// newCheckAllCommand takes every reading a host's vote depends on that can
// be taken by hand, judges each against the decision's limit, and prints
// one verdict, as `etcdctl check perf` answers pass or fail.
func newCheckAllCommand() *cobra.Command {
	var (
		hostRoot, dir string
		peers         []string
		wakeFor       time.Duration
		asJSON        bool
		sf            *settings.Flags
	)
	cmd := &cobra.Command{
		Use:   "all [--dir DIR] [--peer HOST:PORT ...]",
		Short: "Could this host hold an etcd vote? Take every reading, judge each, and print one verdict",
		Long: `Takes the readings a host's fitness to vote depends on, as the checks of the
same names take them, judges each against the limit the decision holds that
signal to (from the settings, as the controller derives them), and prints
one verdict for the host: unfit when any reading is, fit when every judged
one is.

  link     the default route's interface: Wi-Fi is unfit
  memory   MemAvailable, at least the storage quota
  wakeup   a heartbeat-interval timer's largest lateness, under the interval
  fsync    the fdatasync p99 in --dir, under etcd's 10 ms
  connect  with --peer, the slowest connect to the voters' peer ports

A reading that could not be taken is said so and counts as unknown. The
etcd reading (a voter's own member, over a period) is left to check etcd and
the probe. Exit 0 when the host is fit, 3 when it is unfit, 1 when a
reading could not be taken, 2 for a usage error.`,
		Example: `  fleet-role check all --dir /var/lib/rancher/k3s/server --peer 10.0.0.11:2380 --peer 10.0.0.12:2380
  fleet-role check all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hostRoot == "" || dir == "" {
				return usageErrorf("--host-root and --dir must not be empty")
			}
			for _, p := range peers {
				if _, _, err := connect.ParsePeer(p); err != nil {
					return usageError(fmt.Errorf("--peer: %w", err))
				}
			}
			if wakeFor < 2*time.Millisecond {
				return usageErrorf("--wakeup-for %s: must be long enough for the timer to fall due", wakeFor)
			}
			set, err := sf.Load(os.LookupEnv)
			if err != nil {
				return usageError(err)
			}
			ctx, stop := signal.NotifyContext(commandContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep := checkAll(ctx, set, hostRoot, dir, peers, wakeFor, cmd.ErrOrStderr())
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("check all interrupted: %w", context.Cause(ctx))
			}
			if err := printReading(cmd.OutOrStdout(), asJSON, rep, func(w io.Writer) error { return writeAll(w, rep) }); err != nil {
				return err
			}
			switch rep.Verdict {
			case checkUnfit:
				return &exitError{code: ExitUnfit}
			case "unknown":
				return &exitError{code: ExitFail}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&hostRoot, "host-root", "/", "`DIR` where the host's root is mounted; proc and sys are read under it")
	f.StringVar(&dir, "dir", fsync.DefaultDir, "directory for the fsync reading: the disk etcd's data would live on")
	f.StringArrayVar(&peers, "peer", nil, "a voter's peer address `HOST:PORT` to connect to (repeatable; none: no connect reading)")
	f.DurationVar(&wakeFor, "wakeup-for", 10*time.Second, "how long to keep the wake-up timer")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	sf = settings.AddFlagsOf(f, "election_timeout", "heartbeat_interval", "storage_quota_bytes")
	return cmd
}

// checkAll takes the readings one after another (a reading beside another
// would disturb it: the fsync's writes delay the timer) and judges the
// host. Progress goes to progress, one line a reading.
func checkAll(ctx context.Context, s settings.Settings, hostRoot, dir string, peers []string, wakeFor time.Duration, progress io.Writer) allReport {
	var rep allReport
	add := func(name string, v checkVerdict, err error) {
		row := allRow{Reading: name}
		if err != nil {
			row.Err = err.Error()
		} else {
			row.Judged = &v
		}
		rep.Readings = append(rep.Readings, row)
	}
	fmt.Fprintln(progress, "link...")
	lr, err := link.Read(hostRoot)
	add("link", linkVerdict(lr), err)
	fmt.Fprintln(progress, "memory...")
	mr, err := memory.Read(hostRoot)
	add("memory", judge(s.MemoryLimit(s.StorageQuotaBytes, false), "memory_available", float64(mr.MemAvailableBytes)), err)
	fmt.Fprintf(progress, "wakeup, a %v timer for %v...\n", s.HeartbeatInterval, wakeFor)
	m := wakeup.New(s.HeartbeatInterval)
	m.Start(ctx)
	select {
	case <-ctx.Done():
	case <-wall.After(wakeFor):
	}
	m.Stop()
	got, _ := m.Take()
	add("wakeup", judge(s.WakeupLimit(), "wakeup_late max", got.Late.Seconds()), ctx.Err())
	fmt.Fprintf(progress, "fsync in %s...\n", dir)
	fr, err := fsync.Measure(ctx, fsync.Options{Dir: dir})
	add("fsync", fsyncVerdict(fr), err)
	if len(peers) > 0 {
		fmt.Fprintf(progress, "connect to %d peers...\n", len(peers))
		add("connect", connectVerdict(s.ConnectLimit(), connect.Measure(ctx, peers, s.ElectionTimeout)), ctx.Err())
	}
	rep.Verdict = checkFit
	for _, r := range rep.Readings {
		switch {
		case r.Judged != nil && r.Judged.Verdict == checkUnfit:
			rep.Verdict = checkUnfit
		case r.Err != "" && rep.Verdict != checkUnfit:
			rep.Verdict = "unknown"
		}
	}
	return rep
}

func writeAll(w io.Writer, rep allReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "READING\tVERDICT\tWHY\n")
	for _, r := range rep.Readings {
		if r.Judged == nil {
			fmt.Fprintf(tw, "%s\tunknown\tnot taken: %s\n", r.Reading, r.Err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Reading, r.Judged.Verdict, r.Judged.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "this host: %s\n", rep.Verdict)
	return err
}
