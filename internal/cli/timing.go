package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Exit codes of `fleet-role timing`, as a check's: the cluster's timing
// covers the readings (0), no voter has measured any yet (1), or it falls
// short (3); 2 when no status could be read.
const (
	TimingExitCovered    = 0
	TimingExitUnmeasured = 1
	TimingExitShort      = 3
)

// newTimingCommand prints the timing advice of the published status: etcd's
// heartbeat interval and election timeout as the voters' readings call for
// them, beside the cluster's.
func newTimingCommand() *cobra.Command {
	var kubeconfig, kubeContext, output, from string
	cmd := &cobra.Command{
		Use:   "timing",
		Short: "Print the etcd heartbeat and election timeout the measured fleet calls for, beside the cluster's",
		Long: `Reads the status the controller published (as fleet-role status does; or a
saved one with --from FILE, as fleet-role status -o json or decide -o json
write it) and prints its timing advice: the heartbeat interval and election
timeout etcd's tuning guide calls for from the voters' measured round trips
and WAL fsyncs, the cluster's own beside them (the settings'
heartbeat_interval and election_timeout, which must be k3s's), and, when
those fall short, the k3s etcd-arg lines that set what is called for.

The rule (docs/limits.md, "Timing advice"): the heartbeat at least the
slowest round trip between two voters (a TCP connect counting twice, as its
limit is half the round trip's) and the slowest WAL fsync tail (a leader
may write its disk before it sends a heartbeat), rounded up to 10 ms and
never under etcd's own 100 ms; the election timeout ten heartbeats (at least
ten round trips), at most etcd's 50 s. The voters the attribution implicates
are left out: their slow links are theirs, and the swap is the remedy.

-o table (default) or json (the status's timing object).

Exit codes:
  0  the cluster's timing covers the readings
  1  no voter has measured a round trip or a WAL fsync yet
  2  no status could be read (a flag, the kubeconfig, the API server, a
     missing or malformed document)
  3  it falls short: set the etcd-arg lines printed, on every server`,
		Example: "  fleet-role timing\n  fleet-role timing -o json\n  fleet-role status -o json > status.json && fleet-role timing --from status.json",
		Args:    cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config, else k3s's "+k3sKubeconfig+", else in-cluster)")
	f.StringVar(&kubeContext, "context", "", "the kubeconfig context to use (default its current context)")
	f.StringVarP(&output, "output", "o", outputTable, "output format: table or json")
	f.StringVar(&from, "from", "", "read this saved status document instead of the published one")
	sf := settings.AddFlagsOf(f, "namespace", "status_configmap")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if output != outputTable && output != outputJSON {
			return statusErrorf("-o %q: timing prints table or json", output)
		}
		var raw []byte
		if from != "" {
			if cmd.Flags().Changed("kubeconfig") || cmd.Flags().Changed("context") {
				return statusErrorf("--from and --kubeconfig/--context: --from reads a file, not a cluster; leave one out")
			}
			b, err := os.ReadFile(from)
			if err != nil {
				return statusErrorf("--from: %w", err)
			}
			raw = b
		} else {
			s, err := sf.Load(os.LookupEnv)
			if err != nil {
				return statusError(err)
			}
			cfg, err := userConfig(kubeconfig, kubeContext)
			if err != nil {
				return statusError(err)
			}
			cm, err := getStatusConfigMap(cmd.Context(), cfg, s.Namespace, s.StatusConfigMap)
			if err != nil {
				return statusError(err)
			}
			text, ok := cm.Data[status.StatusKey]
			if !ok {
				return statusErrorf("configmap %s/%s has no %s: the controller has not published a decision yet", s.Namespace, s.StatusConfigMap, status.StatusKey)
			}
			raw = []byte(text)
		}
		st, err := status.UnmarshalStatus(raw)
		if err != nil {
			return statusError(err)
		}
		t := st.Timing
		if t.Verdict == "" {
			return statusErrorf("the status holds no timing advice: it was written by a controller older than the advice (its writer's version: %s)", versionOf(st))
		}
		if output == outputJSON {
			b, err := jsonIndent(t)
			if err != nil {
				return statusError(err)
			}
			if _, err := cmd.OutOrStdout().Write(b); err != nil {
				return statusError(err)
			}
		} else if err := writeTiming(cmd.OutOrStdout(), t); err != nil {
			return statusError(err)
		}
		return statusExit(timingCode(t), nil)
	}
	return cmd
}

func versionOf(st *status.Status) string {
	if v := st.Writer.VersionOrEmpty(); v != "" {
		return v
	}
	return "not stamped"
}

func timingCode(t status.Timing) int {
	switch t.Verdict {
	case status.TimingCovered:
		return TimingExitCovered
	case status.TimingUnmeasured:
		return TimingExitUnmeasured
	}
	return TimingExitShort
}

// writeTiming prints the advice: its verdict and sentence, the two values
// beside what is called for, and the k3s lines to set.
func writeTiming(w io.Writer, t status.Timing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "verdict\t%s\n", t.Verdict)
	if t.Verdict != status.TimingUnmeasured {
		fmt.Fprintf(tw, "\tthe cluster's\tcalled for\n")
		fmt.Fprintf(tw, "heartbeat interval\t%d ms\t%d ms\n", t.CurrentHeartbeatMs, t.HeartbeatMs)
		fmt.Fprintf(tw, "election timeout\t%d ms\t%d ms\n", t.CurrentElectionMs, t.ElectionMs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, status.Printable(t.Sentence())); err != nil {
		return err
	}
	if len(t.EtcdArgs) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\nin /etc/rancher/k3s/config.yaml on every server (then restart k3s one server at a time), and as heartbeat_interval and election_timeout in fleet-role's settings:\netcd-arg:\n")
	for _, a := range t.EtcdArgs {
		if err == nil {
			_, err = fmt.Fprintf(w, "  - %s\n", status.Printable(a))
		}
	}
	return err
}
