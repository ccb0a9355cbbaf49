package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// approveFieldManager names the approval's writer in the ConfigMap's
// managedFields, beside the API server's audit log of who it was.
const approveFieldManager = "fleet-role-approve"

func newApproveCommand(name string) *cobra.Command {
	var kubeconfig, kubeContext string
	var withdraw bool
	cmd := &cobra.Command{
		Use:   "approve PLAN",
		Short: "Approve the published swap, by its plan ID, for a controller acting guided",
		Long: `approve lets a controller whose setting acting is guided carry out the swap
the status publishes: it writes PLAN, the plan ID the status names
(` + name + ` status, "acting: guided, plan swap-..."), into the ConfigMap
` + acting.ApprovalConfigMap + ` in fleet-role's namespace. The controller starts the
swap at its next decision once every other guard of its first step holds,
and carries it out step by step (docs/acting.md).

It approves only the plan the status publishes now: a plan ID that is not
the published one is refused, so an approval never starts a swap other than
the one its operator read. An approval is for one swap: once a swap of that
plan has ended, done or aborted, approve it again for another.

Only those allowed to write ` + acting.ApprovalConfigMap + ` may approve: the
Role fleet-role-approver (deploy/acting) grants it, and the API
server's audit log records who did. --withdraw takes an approval back
before the swap starts; a swap already under way goes on (set acting to plan
and restart the controller to stop it between steps).

Exit codes: 0 approved (or withdrawn); 1 the write failed; 2 a bad flag or
argument, the status unreadable, or PLAN not the published plan.`,
		Example: "  " + name + " status\n  " + name + " approve swap-3f1c0a9e2b\n  " + name + " approve --withdraw",
		Args: func(cmd *cobra.Command, args []string) error {
			if withdraw && len(args) > 0 {
				return usageErrorf("--withdraw takes no PLAN: it withdraws whatever approval there is")
			}
			if !withdraw && len(args) != 1 {
				return usageErrorf("approve takes one argument, the plan ID the status publishes (%s status); got %d", name, len(args))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config, else k3s's "+k3sKubeconfig+", else in-cluster)")
	f.StringVar(&kubeContext, "context", "", "the kubeconfig context to use (default its current context)")
	f.BoolVar(&withdraw, "withdraw", false, "take the approval back (a swap already started goes on)")
	sf := settings.AddFlagsOf(f, "namespace", "status_configmap")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := sf.Load(os.LookupEnv)
		if err != nil {
			return usageError(err)
		}
		cfg, err := userConfig(kubeconfig, kubeContext)
		if err != nil {
			return usageError(err)
		}
		if withdraw {
			if err := writeApproval(cmd.Context(), cfg, s.Namespace, ""); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "approval withdrawn (ConfigMap %s/%s); a swap already under way goes on\n", s.Namespace, acting.ApprovalConfigMap)
			return err
		}
		plan := args[0]
		cm, err := getStatusConfigMap(cmd.Context(), cfg, s.Namespace, s.StatusConfigMap)
		if err != nil {
			if apierrors.IsForbidden(err) {
				err = fmt.Errorf("%w (approving needs the Role fleet-role-approver, deploy/acting)", err)
			}
			return usageError(err)
		}
		st, err := status.UnmarshalStatus([]byte(cm.Data[status.StatusKey]))
		if err != nil {
			return usageErrorf("configmap %s/%s, %s: %w", s.Namespace, s.StatusConfigMap, status.StatusKey, err)
		}
		p, err := publishedPlan(st, plan)
		if err != nil {
			return usageError(err)
		}
		if err := writeApproval(cmd.Context(), cfg, s.Namespace, plan); err != nil {
			return err
		}
		return printApproval(cmd.OutOrStdout(), st, p)
	}
	return cmd
}

// publishedPlan is the plan the status publishes, when its ID is id; else
// an error that says what the status publishes instead.
func publishedPlan(st *status.Status, id string) (*acting.Plan, error) {
	a := st.Acting
	switch {
	case a == nil:
		return nil, fmt.Errorf("the status carries no plan (acting is off): set acting to guided (docs/acting.md, \"Turn acting on\") and approve the plan it publishes")
	case a.Plan == nil:
		return nil, fmt.Errorf("plan %q: the status publishes no swap now (decision %s)", status.Printable(id), st.Decision.Action)
	case a.Plan.ID != id:
		return nil, fmt.Errorf("plan %q is not the published plan: the status publishes %s (%s)", status.Printable(id), a.Plan.ID, status.Printable(acting.Parties(a.Plan.Kind, a.Plan.Out.Node, a.Plan.In.Node)))
	}
	if j := a.Journal; j != nil && j.Phase.Open() && j.PlanID != id {
		return nil, fmt.Errorf("plan %q: the swap %s is %s: one swap at a time", status.Printable(id), j.PlanID, j.Phase)
	}
	return a.Plan, nil
}

// writeApproval sets the approval ConfigMap's plan ID by a server-side
// apply: an apply that creates is authorized as a create of that name, so
// RBAC can grant it by name (resourceNames) alone.
func writeApproval(ctx context.Context, cfg *rest.Config, namespace, plan string) error {
	c, err := kube.NewClientForConfig(cfg)
	if err != nil {
		return usageError(err)
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": acting.ApprovalConfigMap, "namespace": namespace, "labels": kube.StatusLabels()},
		"data":     map[string]string{acting.ApprovalKey: plan},
	})
	if err != nil {
		return err
	}
	force := true
	_, err = c.ConfigMapClient(namespace).Patch(ctx, acting.ApprovalConfigMap, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: approveFieldManager, Force: &force})
	if err != nil {
		var forbidden string
		if apierrors.IsForbidden(err) {
			forbidden = " (approving needs the Role fleet-role-approver, deploy/acting)"
		}
		return fmt.Errorf("write configmap %s/%s%s: %w", namespace, acting.ApprovalConfigMap, forbidden, err)
	}
	return nil
}

func printApproval(w io.Writer, st *status.Status, p *acting.Plan) error {
	mode := "guided"
	if st.Acting != nil {
		mode = st.Acting.Mode
	}
	first := acting.StepAdmit
	if len(p.Steps) > 0 {
		first = p.Steps[0].Name
	}
	next := "the controller starts it at its next decision once every other guard of " + string(first) + " holds"
	if !p.Ready {
		next = string(first) + " is held now (" + status.Printable(string(firstHeld(p))) + "): the controller starts it once every guard holds"
	}
	if mode != settings.ActingGuided {
		next = "acting is " + status.Printable(mode) + ", not guided: this approval is kept, and used only if acting is guided"
	}
	_, err := fmt.Fprintf(w, "approved %s: %s; %s\n", p.ID, status.Printable(acting.Parties(p.Kind, p.Out.Node, p.In.Node)), next)
	return err
}

// firstHeld is the first guard of the first step that does not hold, the
// approval aside.
func firstHeld(p *acting.Plan) acting.GuardCode {
	for _, g := range p.Steps[0].Guards {
		if !g.OK && g.Code != acting.GuardApproval {
			return g.Code
		}
	}
	return ""
}
