package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// Exit codes of `fleet-role status`, for scripts: what the published
// decision advises, or that it could not be read.
const (
	StatusExitNone  = 0 // the decision is none: nothing to do
	StatusExitSwap  = 1 // the decision is a swap
	StatusExitError = 2 // no status could be read: a flag, the kubeconfig, the API server, a missing or malformed document
	// StatusExitStale (3, status_age.go): the status is older than any
	// controller writing it leaves it.
)

// newStatusCommand reads the status the controller published, with the
// user's kubeconfig, and prints it as `decide -o table` does.
func newStatusCommand(name string) *cobra.Command {
	var kubeconfig, kubeContext, output, htmlFile, nowFlag string
	var watchFlag bool
	cmd := &cobra.Command{
		Use:   "status [HOST]",
		Short: "Print the live status the controller published (exit 0 nothing to do, 1 a swap advised, 2 error)",
		Long: `Reads the status document the controller published (status.json of the
fleet-role-status ConfigMap; namespace and name from the settings, as the
controller takes them: -n/--namespace, --status-configmap, FLEET_ROLE_* or
--settings) with your kubeconfig (--kubeconfig, else $KUBECONFIG, else
~/.kube/config, else k3s's /etc/rancher/k3s/k3s.yaml, else the pod's
in-cluster ServiceAccount), and prints it:

` + outputsDoc + `

as ` + "`fleet-role decide`" + ` prints the status it makes; -o json prints the document
exactly as the ConfigMap holds it. --html FILE also writes the page to FILE
while the table or JSON is printed.

With HOST it prints that host alone with every reason, its number, limit and
basis (-o json: the host's object of the document), and the decision.
--watch prints the status again each time the controller publishes a new
one, until interrupted.

Installed as kubectl-fleet_role on the PATH, the same binary is a kubectl
plugin: kubectl fleet-role status [HOST].

The first line says when the status was decided, by which controller, and
how old it is. The controller rewrites it at least once a window (even when
nothing changed) and a follower takes over a lost leader within seconds, so
a status older than a window, a period and that takeover is STALE: no
controller is writing it, and what it says is not current.

` + exitCodesDoc + `; here also no kubeconfig, the API server
     unreachable or refusing, the ConfigMap or its status.json missing, a
     malformed document, or an unknown HOST
  3  the status is stale: no controller is writing it (whatever it decided)
With --watch, the code of the last status printed (2 when the last read
failed).`,
		Example: "  " + name + " status\n  " + name + " status voter-2\n  " + name + " status -o json | jq .decision\n  " + name + " status --watch",
		Args:    cobra.MaximumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config, else k3s's "+k3sKubeconfig+", else in-cluster)")
	f.StringVar(&kubeContext, "context", "", "the kubeconfig context to use (default its current context)")
	addOutputFlag(f, &output)
	f.BoolVarP(&watchFlag, "watch", "w", false, "print the status again at each change, until interrupted")
	f.StringVar(&htmlFile, "html", "", "also write the status page (self-contained HTML) to this file")
	f.StringVar(&nowFlag, "now", "", "count the status's age to this time, RFC 3339 (default: this machine's clock), as decide --now replays a decision")
	// The settings that name the status; the others do not apply here.
	sf := settings.AddFlagsOf(f, "namespace", "status_configmap")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutput(output); err != nil {
			return err
		}
		s, err := sf.Load(os.LookupEnv)
		if err != nil {
			return statusError(err)
		}
		host := ""
		if len(args) == 1 {
			host = args[0]
		}
		if (htmlFile != "" || output == outputHTML) && watchFlag {
			return statusErrorf("html and --watch: the page is written from one status; leave one out")
		}
		if output == outputHTML && host != "" {
			return statusErrorf("-o html and HOST %q: the page shows the whole fleet; leave HOST out, or use -o table or json", status.Printable(host))
		}
		cfg, err := userConfig(kubeconfig, kubeContext)
		if err != nil {
			return statusError(err)
		}
		now := wall.Now
		if nowFlag != "" {
			at, err := time.Parse(time.RFC3339, nowFlag)
			if err != nil {
				return statusErrorf("--now %q: want an RFC 3339 time, such as 2026-12-02T15:04:05Z: %w", nowFlag, err)
			}
			now = func() time.Time { return at }
		}
		r := statusReader{namespace: s.Namespace, name: s.StatusConfigMap, output: output, host: host, html: htmlFile, now: now}
		out := cmd.OutOrStdout()
		if watchFlag {
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer cancel()
			return r.watch(ctx, cfg, out, cmd.ErrOrStderr())
		}
		cm, err := getStatusConfigMap(cmd.Context(), cfg, s.Namespace, s.StatusConfigMap)
		if err != nil {
			return statusError(err)
		}
		return statusExit(r.print(out, cm))
	}
	return cmd
}

// getStatusConfigMap reads the ConfigMap the controller publishes its
// status in, naming the namespace to look in when it is not there.
func getStatusConfigMap(ctx context.Context, cfg *rest.Config, namespace, name string) (*corev1.ConfigMap, error) {
	c, err := kube.NewClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cm, err := c.ConfigMapClient(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("configmap %s/%s: not found: is the fleet-role controller installed in namespace %s (--namespace)?", namespace, name, namespace)
		}
		return nil, fmt.Errorf("get configmap %s/%s: %w", namespace, name, err)
	}
	return cm, nil
}

// k3sKubeconfig is where a k3s server writes its admin kubeconfig
// (write-kubeconfig, k3s's default): a k3s operator on a server has it and
// often no other. A variable, for the tests.
var k3sKubeconfig = "/etc/rancher/k3s/k3s.yaml"

// userConfig is the client configuration kubectl would use (the explicit
// file, else $KUBECONFIG's files, else ~/.kube/config), then k3s's own
// kubeconfig when none of those exists, then the pod's in-cluster
// configuration; with none of them, an error that names what was tried
// rather than client-go's hint about KUBERNETES_MASTER.
func userConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	home := clientcmd.RecommendedHomeFile
	if path == "" && env == "" && !exists(home) && exists(k3sKubeconfig) {
		rules.ExplicitPath = k3sKubeconfig
	}
	over := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, over).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		tried := []string{"--kubeconfig (not given)"}
		if env != "" {
			tried = append(tried, "$KUBECONFIG ("+env+": no cluster in it)")
		} else {
			tried = append(tried, "$KUBECONFIG (unset)")
		}
		tried = append(tried, home+" (not found)", "k3s's "+k3sKubeconfig+" (not found, or not readable by this user)",
			"the in-cluster ServiceAccount (not in a pod: $KUBERNETES_SERVICE_HOST unset)")
		return nil, fmt.Errorf("no kubeconfig: tried %s; on a k3s server run as root, or pass --kubeconfig", strings.Join(tried, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// exists is whether path is a file this process can read.
func exists(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// statusReader prints one published status as asked.
type statusReader struct {
	namespace, name string
	output          string
	host            string
	html            string // a file to write the page to, or none
	now             func() time.Time
}

// print writes the status the ConfigMap holds and returns the exit code it
// calls for, or an error when it holds none that can be read.
func (r statusReader) print(w io.Writer, cm *corev1.ConfigMap) (int, error) {
	raw, ok := cm.Data[status.StatusKey]
	if !ok {
		return StatusExitError, fmt.Errorf("configmap %s/%s has no %s: the controller has not published a decision yet", r.namespace, r.name, status.StatusKey)
	}
	st, err := status.UnmarshalStatus([]byte(raw))
	if err != nil {
		return StatusExitError, fmt.Errorf("configmap %s/%s, %s: %w", r.namespace, r.name, status.StatusKey, err)
	}
	code := decisionCode(st)
	age, stale := ageLine(st, r.now())
	if stale {
		code = StatusExitStale
	}
	source := fmt.Sprintf("published status (ConfigMap %s/%s)", r.namespace, r.name)
	if r.output == outputHTML {
		return code, statuspage.Render(w, statuspage.PageOf(st, source))
	}
	if r.output == outputTable {
		if _, err := fmt.Fprintln(w, age); err != nil {
			return StatusExitError, err
		}
	}
	if r.html != "" {
		if err := writePage(r.html, st, source); err != nil {
			return StatusExitError, err
		}
	}
	if r.host != "" {
		h, ok := findHost(st, r.host)
		if !ok {
			return StatusExitError, fmt.Errorf("host %q: not in the status (%s)", status.Printable(r.host), hostList(st))
		}
		if r.output == "json" {
			b, err := jsonIndent(h)
			if err != nil {
				return StatusExitError, err
			}
			_, err = w.Write(b)
			return code, err
		}
		return code, writeHost(w, st, h)
	}
	if r.output == "json" {
		// Exactly the document: the bytes the controller wrote.
		_, err := io.WriteString(w, raw)
		if err == nil && !strings.HasSuffix(raw, "\n") {
			_, err = io.WriteString(w, "\n")
		}
		return code, err
	}
	return code, st.WriteTable(w)
}

func findHost(st *status.Status, name string) (status.Host, bool) {
	for _, h := range st.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return status.Host{}, false
}

// hostList names the status's hosts for an error, at most a fleet's worth
// (etcd's most members, seven, and as many standbys) before it counts.
func hostList(st *status.Status) string {
	const most = 14
	names := make([]string, 0, len(st.Hosts))
	for _, h := range st.Hosts {
		names = append(names, status.Printable(h.Name))
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "it names no host"
	}
	if len(names) > most {
		return fmt.Sprintf("hosts %s and %d more", strings.Join(names[:most], ", "), len(names)-most)
	}
	return "hosts " + strings.Join(names, ", ")
}

// writeHost prints one host with every reason: its mark, the reason in one
// line with its number and limit, and the basis of the limit.
func writeHost(w io.Writer, st *status.Status, h status.Host) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "host\t%s\n", status.Printable(h.Name))
	fmt.Fprintf(tw, "role\t%s\n", status.Printable(string(h.Role)))
	fmt.Fprintf(tw, "eligible\t%t\n", h.Eligible)
	fmt.Fprintf(tw, "pinned\t%t\n", h.Pinned)
	fmt.Fprintf(tw, "verdict\t%s\n", status.Printable(string(h.Verdict)))
	fmt.Fprintf(tw, "samples\t%d of a window of %d\n", h.Samples, st.Settings.Values.Window)
	if h.RecordBytes > 0 {
		fmt.Fprintf(tw, "record\t%d bytes (cap %d)\n", h.RecordBytes, st.Records.CapBytes)
	}
	if h.Observation != nil {
		fmt.Fprintf(tw, "entry changed\t%s\n", h.Observation.ChangedAt.UTC().Format("2006-01-02T15:04:05Z07:00"))
	}
	fmt.Fprintf(tw, "decided at\t%s\n", st.GeneratedAt.UTC().Format("2006-01-02T15:04:05Z07:00"))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write host: %w", err)
	}
	if r, ok := status.DecidingReason(h); ok {
		fmt.Fprintf(&b, "deciding: %s\n", status.Printable(status.Summary(r)))
	}
	fmt.Fprintf(&b, "reasons (%d):\n", len(h.Reasons))
	for _, r := range h.Reasons {
		mark := "ok"
		if !r.OK {
			mark = "NO"
		}
		fmt.Fprintf(&b, "  %-3s %s\n", mark, status.Printable(status.Summary(r)))
		if r.Value != nil && r.Limit != nil && r.Detail != "" {
			fmt.Fprintf(&b, "        %s\n", status.Printable(r.Detail))
		}
		if r.Basis != "" {
			fmt.Fprintf(&b, "        basis: %s\n", status.Printable(r.Basis))
		}
	}
	d := st.Decision
	switch {
	case d.Action == status.ActionSwap && d.Out == h.Name:
		fmt.Fprintf(&b, "decision: swap %s out, %s in: this host would leave (dry run: nothing is changed)\n", status.Printable(d.Out), status.Printable(d.In))
	case d.Action == status.ActionSwap && d.In == h.Name:
		fmt.Fprintf(&b, "decision: swap %s out, %s in: this host would join (dry run: nothing is changed)\n", status.Printable(d.Out), status.Printable(d.In))
	case d.Action == status.ActionSwap:
		fmt.Fprintf(&b, "decision: swap %s out, %s in: not this host (dry run: nothing is changed)\n", status.Printable(d.Out), status.Printable(d.In))
	default:
		if r, ok := d.DecidingStep(); ok {
			fmt.Fprintf(&b, "decision: none, held by %s\n", status.Printable(r.Signal))
		} else {
			fmt.Fprintf(&b, "decision: none\n")
		}
		for _, r := range d.Reasons {
			if !r.OK {
				fmt.Fprintf(&b, "  NO  %s: %s\n", status.Printable(r.Signal), status.Printable(r.Detail))
			}
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// watch prints the status, then again each time its document changes,
// until ctx ends. A status that cannot be read (deleted, malformed) is
// reported on errOut and the watch goes on; the exit code is the last
// status's.
func (r statusReader) watch(ctx context.Context, cfg *rest.Config, out, errOut io.Writer) error {
	// No client timeout: it would cut the watch's long response. Each
	// watch request is bounded by the server's timeoutSeconds, and
	// UntilWithSync lists and watches again when one ends.
	c, err := kube.NewWatchClientForConfig(cfg)
	if err != nil {
		return statusError(err)
	}
	cms := c.ConfigMapClient(r.namespace)
	sel := fields.OneTermEqualSelector("metadata.name", r.name).String()
	// errOut is written by the list's goroutine (the reflector's) and the
	// handler's.
	var errMu sync.Mutex
	say := func(format string, a ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		fmt.Fprintf(errOut, "fleet-role: "+format+"\n", a...)
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			l, err := cms.List(ctx, o)
			if err != nil && ctx.Err() == nil {
				// The reflector tries again with a backoff; said each
				// time, so that an unreachable API server is not a
				// silent wait.
				say("list configmap %s/%s: %v; trying again", r.namespace, r.name, err)
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			w, err := cms.Watch(ctx, o)
			if err != nil && ctx.Err() == nil {
				// client-go's reflector may start with a watch that
				// streams the list (WatchList): its failures too.
				say("watch configmap %s/%s: %v; trying again", r.namespace, r.name, err)
			}
			return w, err
		},
	}
	code := StatusExitError
	var last string
	var lastErr error
	shown := false
	report := func(text string, c int, err error) {
		if shown && text == last {
			return
		}
		shown, last, code, lastErr = true, text, c, err
		if err != nil {
			say("%v", err)
		}
	}
	precondition := func(store cache.Store) (bool, error) {
		if len(store.List()) == 0 {
			report("", StatusExitError, fmt.Errorf("configmap %s/%s: not found: waiting for the controller to create it", r.namespace, r.name))
		}
		return false, nil
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &corev1.ConfigMap{}, precondition, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			report("", StatusExitError, fmt.Errorf("configmap %s/%s: deleted", r.namespace, r.name))
		case watch.Added, watch.Modified:
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				return false, nil
			}
			text := cm.Data[status.StatusKey]
			if shown && text == last && lastErr == nil {
				return false, nil
			}
			var b bytes.Buffer
			c, err := r.print(&b, cm)
			if err == nil && shown {
				fmt.Fprintln(out)
			}
			if err == nil {
				if _, werr := out.Write(b.Bytes()); werr != nil {
					return true, werr
				}
			}
			report(text, c, err)
		}
		return false, nil
	})
	if err != nil && !errors.Is(err, watchtools.ErrWatchClosed) && ctx.Err() == nil {
		return statusErrorf("watch configmap %s/%s: %w", r.namespace, r.name, err)
	}
	if lastErr != nil {
		return &exitError{code: StatusExitError, err: nil}
	}
	return statusExit(code, nil)
}

// statusExit turns a printed status's code into the command's result: nil
// for nothing to do, a silent exit 1 for a swap, exit 2 with the error.
func statusExit(code int, err error) error {
	if err != nil {
		return statusError(err)
	}
	if code == StatusExitNone {
		return nil
	}
	return &exitError{code: code}
}

// statusError makes every failure of status exit 2, the one code a script
// reads as "no answer" (the other commands exit 1 for a failed read).
func statusError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: StatusExitError, err: err}
}

func statusErrorf(format string, a ...any) error {
	return statusError(fmt.Errorf(format, a...))
}

// jsonIndent is v as the status document writes its objects: indented by
// two spaces, ending in a newline.
func jsonIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return append(b, '\n'), nil
}

// writePage writes the status page of st to path, whole or not at all: to
// a file beside it, renamed over path once written.
func writePage(path string, st *status.Status, source string) error {
	var b bytes.Buffer
	if err := statuspage.Render(&b, statuspage.PageOf(st, source)); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write --html: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write --html: %w", err)
	}
	return nil
}
