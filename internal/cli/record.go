package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// newRecordCommand prints the probes' records as the controller reads
// them: a record in the tail layout (a packed window and a tail) is
// unpacked and merged, so that every layout reads as the same JSON.
func newRecordCommand(name string) *cobra.Command {
	var kubeconfig, kubeContext, file string
	cmd := &cobra.Command{
		Use:   "record [NODE]",
		Short: "Print the probes' records as the controller reads them, as JSON",
		Long: `Prints each probe's record as the controller reads it: the entry's JSON
(docs/entry.md), whichever layout the record is in (docs/records.md,
"Layouts"). A record in the tail layout holds its window packed and a second
ConfigMap, NODE.tail, the samples since; this command unpacks both and
prints the window they read as, exactly what the controller decides on.

The records are read from the cluster with your kubeconfig (as
` + "`status`" + ` reads it) in fleet-role's records namespace (the namespace
setting's, -n/--namespace, and -records), or with -f from a file that
` + "`kubectl -n fleet-role-records get cm -l " + record.AnySelector + " -o json`" + ` wrote (- for
standard input).

With NODE it prints that node's entry alone; without, an object of every
node's entry by name. A record that cannot be read is named on standard
error with why, and the exit code is 2.`,
		Example: "  " + name + " record\n  " + name + " record server-2 | jq '.connect_us'\n" +
			"  kubectl -n fleet-role-records get cm -l " + record.AnySelector + " -o json | " + name + " record -f -",
		Args: cobra.MaximumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config, else k3s's "+k3sKubeconfig+", else in-cluster)")
	f.StringVar(&kubeContext, "context", "", "the kubeconfig context to use (default its current context)")
	f.StringVarP(&file, "filename", "f", "", "read the records from this file of `kubectl get cm -o json` (- for standard input) rather than the cluster")
	sf := settings.AddFlagsOf(f, "namespace")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := sf.Load(os.LookupEnv)
		if err != nil {
			return usageError(err)
		}
		var entries, unreadable map[string]string
		if file != "" {
			data, err := readFileOrStdin(file, cmd.InOrStdin())
			if err != nil {
				return usageErrorf("read -f: %w", err)
			}
			if entries, unreadable, err = probeInput(data); err != nil {
				return usageErrorf("-f %s: %w", file, err)
			}
		} else {
			cfg, err := userConfig(kubeconfig, kubeContext)
			if err != nil {
				return usageError(err)
			}
			c, err := kube.NewClientForConfig(cfg)
			if err != nil {
				return usageError(err)
			}
			l, err := c.ConfigMapClient(s.RecordsNamespace()).List(cmd.Context(), metav1.ListOptions{LabelSelector: record.AnySelector})
			if err != nil {
				return usageErrorf("list the records in namespace %s: %w", s.RecordsNamespace(), err)
			}
			cms := make([]*corev1.ConfigMap, len(l.Items))
			for i := range l.Items {
				cms[i] = &l.Items[i]
			}
			entries, unreadable = record.ReadAll(cms)
		}
		return printRecords(cmd.OutOrStdout(), cmd.ErrOrStderr(), entries, unreadable, args)
	}
	return cmd
}

// printRecords prints the entries (of node alone, when args names one) as
// indented JSON, and the unreadable records on stderr.
func printRecords(out, errOut io.Writer, entries, unreadable map[string]string, args []string) error {
	var names []string
	for n := range unreadable {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 1 {
		node := args[0]
		if why, ok := unreadable[node]; ok {
			return usageErrorf("record of %s cannot be read: %s", node, why)
		}
		text, ok := entries[node]
		if !ok {
			return usageErrorf("no record of node %q (records of %d nodes)", node, len(entries)+len(unreadable))
		}
		if !json.Valid([]byte(text)) {
			return usageErrorf("record of %s cannot be read: its entry is not JSON", node)
		}
		return printIndented(out, json.RawMessage(text))
	}
	all := map[string]json.RawMessage{}
	for n, text := range entries {
		if !json.Valid([]byte(text)) {
			unreadable[n] = "its entry is not JSON"
			names = append(names, n)
			continue
		}
		all[n] = json.RawMessage(text)
	}
	sort.Strings(names)
	if err := printIndented(out, all); err != nil {
		return err
	}
	for _, n := range names {
		fmt.Fprintf(errOut, "record of %s cannot be read: %s\n", n, unreadable[n])
	}
	if len(names) > 0 {
		return usageErrorf("%d of %d records cannot be read", len(names), len(names)+len(entries))
	}
	return nil
}

func printIndented(out io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("print the entry: %w", err)
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, b, "", "  "); err != nil {
		return fmt.Errorf("print the entry: %w", err)
	}
	ind.WriteByte('\n')
	_, err = out.Write(ind.Bytes())
	return err
}

// readFileOrStdin reads path, or in when path is "-".
func readFileOrStdin(path string, in io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(in)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file", path)
	}
	return b, err
}
