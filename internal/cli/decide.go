package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// newDecideCommand makes the decision offline from saved inputs, so that an
// operator can replay or question a decision the controller published.
func newDecideCommand() *cobra.Command {
	var probe, nodes, previous, now, output string
	cmd := &cobra.Command{
		Use:   "decide --probe FILE --nodes FILE [--previous FILE] [--settings FILE] [--now RFC3339] [-o json|table]",
		Short: "Decide offline from a saved probe ConfigMap and Nodes, and print the status",
		Long: `Makes the controller's decision from saved inputs and prints it, touching no
cluster:

  kubectl -n github-runner-platform get configmap fleet-role-probe -o json > probe.json
  kubectl get nodes -o json > nodes.json
  kubectl -n github-runner-platform get configmap fleet-role-status -o json > previous.json
  fleet-role decide --probe probe.json --nodes nodes.json --previous previous.json -o table

--previous takes a status.json or the fleet-role-status ConfigMap; without it
every entry counts as just changed and the voter set dates from the voters'
k3s EtcdIsVoter transitions, or from now when a voter has none (so the
cooldown runs). --now replays a decision at a given time (default: now).
Settings come from --settings, FLEET_ROLE_* variables and the flags below, as
for the controller. Exit 1 when a file cannot be read, 2 for a bad flag,
setting or input.`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&probe, "probe", "", "the fleet-role-probe ConfigMap as JSON (kubectl get configmap -o json)")
	f.StringVar(&nodes, "nodes", "", "the Nodes as JSON (kubectl get nodes -o json)")
	f.StringVar(&previous, "previous", "", "the previous status: status.json or the fleet-role-status ConfigMap as JSON")
	f.StringVar(&now, "now", "", "the time of the decision, RFC 3339 (default: the current time)")
	f.StringVarP(&output, "output", "o", "json", "json (the status document) or table")
	sf := settings.AddFlags(f)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if probe == "" || nodes == "" {
			return usageErrorf("decide needs --probe FILE and --nodes FILE")
		}
		if output != "json" && output != "table" {
			return usageErrorf("-o %q: want json or table", output)
		}
		at := time.Now()
		if now != "" {
			t, err := time.Parse(time.RFC3339Nano, now)
			if err != nil {
				return usageErrorf("--now %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", now)
			}
			at = t
		}
		s, err := sf.Load(os.LookupEnv)
		if err != nil {
			if _, ok := errors.AsType[*fs.PathError](err); ok {
				return err
			}
			return usageError(err)
		}
		in := decide.Input{Now: at, Settings: s}

		var cm corev1.ConfigMap
		if err := readJSON("--probe", probe, &cm); err != nil {
			return err
		}
		if cm.Kind != "" && cm.Kind != "ConfigMap" {
			return usageErrorf("--probe %s: kind %q, want the ConfigMap %s", probe, cm.Kind, s.ProbeConfigMap)
		}
		in.Entries = decide.EntriesFromConfigMap(&cm)

		var list corev1.NodeList
		if err := readJSON("--nodes", nodes, &list); err != nil {
			return err
		}
		for i, n := range list.Items {
			if n.Kind != "" && n.Kind != "Node" {
				return usageErrorf("--nodes %s: item %d is a %s, want Nodes", nodes, i, n.Kind)
			}
		}
		in.Nodes = decide.NodesFromKube(list.Items, s)

		if previous != "" {
			data, err := os.ReadFile(previous)
			if err != nil {
				return fmt.Errorf("read --previous: %w", err)
			}
			if in.Previous, err = decide.StatusFromJSON(data); err != nil {
				return usageErrorf("--previous %s: %w", previous, err)
			}
		}

		st := decide.Decide(in)
		out := cmd.OutOrStdout()
		if output == "table" {
			return st.WriteTable(out)
		}
		b, err := st.Marshal()
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	return cmd
}

// readJSON reads a file into v: exit 1 when it cannot be read, 2 when it is
// not the JSON it should be.
func readJSON(flag, path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", flag, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return usageErrorf("%s %s: %w", flag, path, err)
	}
	return nil
}
