package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// newDecideCommand makes the decision offline from saved inputs, so that an
// operator can replay or question a decision the controller published.
func newDecideCommand() *cobra.Command {
	var probe, nodes, previous, now, output string
	cmd := &cobra.Command{
		Use:   "decide --probe FILE --nodes FILE [--previous FILE] [--settings FILE] [--now RFC3339] [-o table|json|html]",
		Short: "Decide offline from saved probe records and Nodes, and print the status (exit 0 nothing to do, 1 a swap, 2 error)",
		Long: `Makes the controller's decision from saved inputs and prints it, touching no
cluster:

  kubectl -n fleet-role-records get configmap -l fleet-role.io/record -o json > records.json
  kubectl get nodes -o json > nodes.json
  kubectl -n fleet-role get configmap fleet-role-status -o json > previous.json
  fleet-role decide --probe records.json --nodes nodes.json --previous previous.json -o table

--probe takes the records as kubectl lists them (a List of ConfigMaps), one
record, or the single fleet-role-probe ConfigMap of installs before records
(one key per node).

--previous takes a status.json or the fleet-role-status ConfigMap; without it
every entry counts as just changed and the voter set dates from the voters'
k3s EtcdIsVoter transitions, or from now when a voter has none (so the
cooldown runs). --now replays a decision at a given time (default: now).
Settings come from --settings, FLEET_ROLE_* variables and the flags below, as
for the controller.

It prints the status as ` + "`fleet-role status`" + ` prints the published one:

` + outputsDoc + `

` + exitCodesDoc + ` (a file that cannot be read included)`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&probe, "probe", "", "the probe records as JSON (kubectl -n fleet-role-records get configmap -l fleet-role.io/record -o json)")
	f.StringVar(&nodes, "nodes", "", "the Nodes as JSON (kubectl get nodes -o json)")
	f.StringVar(&previous, "previous", "", "the previous status: status.json or the fleet-role-status ConfigMap as JSON")
	f.StringVar(&now, "now", "", "the time of the decision, RFC 3339 (default: the current time)")
	addOutputFlag(f, &output)
	sf := settings.AddFlags(f)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if probe == "" || nodes == "" {
			return usageErrorf("decide needs --probe FILE and --nodes FILE")
		}
		if err := checkOutput(output); err != nil {
			return err
		}
		at := wall.Now()
		if now != "" {
			t, err := time.Parse(time.RFC3339Nano, now)
			if err != nil {
				return usageErrorf("--now %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", now)
			}
			at = t
		}
		s, err := sf.Load(os.LookupEnv)
		if err != nil {
			return usageError(err)
		}
		in := decide.Input{Now: at, Settings: s}

		data, err := os.ReadFile(probe)
		if err != nil {
			return usageErrorf("read --probe: %w", err)
		}
		if in.Entries, in.Unreadable, err = probeInput(data); err != nil {
			if _, ok := errors.AsType[*json.SyntaxError](err); ok || len(bytes.TrimSpace(data)) == 0 {
				return notJSON("--probe", probe, data, err)
			}
			return usageErrorf("--probe %s: %w", probe, err)
		}
		if len(in.Entries)+len(in.Unreadable) == 0 {
			// A decision on no record judges every host unknown: an input
			// that holds none is a wrong file, or a namespace with no
			// probe writing, and is said so rather than decided on.
			return usageErrorf("--probe %s: holds no probe record; want %s (no record there: is the probe DaemonSet running, in that namespace?)", probe, inputWants["--probe"])
		}

		var list corev1.NodeList
		if err := readJSON("--nodes", nodes, &list); err != nil {
			return err
		}
		for i, n := range list.Items {
			if n.Kind != "" && n.Kind != "Node" {
				return usageErrorf("--nodes %s: item %d is a %s, want Nodes", nodes, i, n.Kind)
			}
		}
		if len(list.Items) == 0 {
			return usageErrorf("--nodes %s: holds no Node; want %s", nodes, inputWants["--nodes"])
		}
		in.Nodes = kube.NodesFromKube(list.Items, s)

		if previous != "" {
			data, err := os.ReadFile(previous)
			if err != nil {
				return usageErrorf("read --previous: %w", err)
			}
			if in.Previous, err = status.StatusFromJSON(data); err != nil {
				if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
					return notJSON("--previous", previous, data, err)
				}
				return usageErrorf("--previous %s: %w", previous, err)
			}
		}

		st := decide.Decide(in)
		kube.WithActing(&st, list.Items, s, in.Now, nil)
		out := cmd.OutOrStdout()
		switch output {
		case outputTable:
			err = st.WriteTable(out)
		case outputHTML:
			err = statuspage.Render(out, statuspage.Page{Model: statuspage.ModelOf(&st), Source: "fleet-role decide, from " + probe + " and " + nodes})
		default:
			var b []byte
			if b, err = st.Marshal(); err == nil {
				_, err = out.Write(b)
			}
		}
		if err != nil {
			return err
		}
		return decisionExit(&st)
	}
	return cmd
}

// The inputs decide takes, each as the command that gets it.
var inputWants = map[string]string{
	"--probe":    "the records and their tails as `kubectl -n fleet-role-records get configmap -l " + record.AnySelector + " -o json` prints them",
	"--nodes":    "the Nodes as `kubectl get nodes -o json` prints them",
	"--previous": "the status as `kubectl -n fleet-role get configmap fleet-role-status -o json` prints it, or its status.json",
}

// notJSON says why data is not the JSON flag wants, and how to get it: an
// empty file, YAML (kubectl's -o yaml), or JSON that does not parse.
func notJSON(flag, path string, data []byte, err error) error {
	want := inputWants[flag]
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0:
		return usageErrorf("%s %s: the file is empty; want %s", flag, path, want)
	case trimmed[0] != '{' && trimmed[0] != '[':
		return usageErrorf("%s %s: not JSON (it begins %q, YAML or text?); want %s", flag, path, clipText(trimmed, 20), want)
	}
	return usageErrorf("%s %s: %w; want %s", flag, path, err, want)
}

func clipText(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// readJSON reads a file into v: exit 1 when it cannot be read, 2 when it is
// not the JSON it should be.
func readJSON(flag, path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return usageErrorf("read %s: %w", flag, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return notJSON(flag, path, data, err)
	}
	return nil
}

// legacySharedConfigMap is the one ConfigMap the installs before records
// shared, a key a node.
const legacySharedConfigMap = "fleet-role-probe"

// probeInput reads --probe: a List of records as `kubectl get cm -l
// fleet-role.io/record -o json` prints it (kind List or
// ConfigMapList), or one record. It returns the entries and the records
// that cannot be read as records, as the controller does. The one shared
// ConfigMap of the installs before records (fleet-role-probe, a key a
// node) is not read: no release wrote it.
func probeInput(data []byte) (entries, unreadable map[string]string, err error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, nil, err
	}
	switch head.Kind {
	case "List", "ConfigMapList":
		// One pass straight into the ConfigMaps: the file is as large as
		// the fleet's records, and is not copied item by item first.
		var list struct {
			Items []struct {
				Kind string `json:"kind"`
				corev1.ConfigMap
			} `json:"items"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, nil, err
		}
		records := make([]*corev1.ConfigMap, 0, len(list.Items))
		for i := range list.Items {
			if k := list.Items[i].Kind; k != "" && k != "ConfigMap" {
				return nil, nil, fmt.Errorf("item %d is a %s, want ConfigMaps", i, k)
			}
			records = append(records, &list.Items[i].ConfigMap)
		}
		entries, unreadable = record.ReadAll(records)
		return entries, unreadable, nil
	case "ConfigMap", "":
		var cm corev1.ConfigMap
		if err := json.Unmarshal(data, &cm); err != nil {
			return nil, nil, err
		}
		if cm.Name == legacySharedConfigMap && !record.IsRecord(&cm) {
			return nil, nil, fmt.Errorf("ConfigMap %s is the one shared ConfigMap of installs before records, which no release wrote and fleet-role no longer reads (docs/records.md, Moving an install from the shared ConfigMap)", cm.Name)
		}
		if !record.IsRecord(&cm) {
			return nil, nil, nil // no record: the caller says what it wants
		}
		entries, unreadable = record.ReadAll([]*corev1.ConfigMap{&cm})
		return entries, unreadable, nil
	}
	return nil, nil, fmt.Errorf("kind %q: want a List of records (kubectl get cm -l %s -o json) or a record", head.Kind, record.AnySelector)
}
