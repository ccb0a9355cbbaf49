package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/acting"
)

// SwapStore is what the controller reads and writes to carry out a swap
// (docs/acting.md, "The objects"): the journal, the operator's approval,
// the actuators' reports, and the remove annotation on the leaving voter's
// Node. Every write of the journal carries the resourceVersion it was read
// at, so that two controllers never both advance one swap.
type SwapStore interface {
	// Journal returns the journal the ConfigMap holds (nil when it holds
	// none yet) and the ConfigMap's resourceVersion; an error wrapping
	// ErrNotFound when the install made no journal ConfigMap.
	Journal(ctx context.Context) (*acting.Journal, string, error)
	// WriteJournal writes j when the ConfigMap is still at rv; an error
	// wrapping ErrConflict otherwise. It returns the new resourceVersion.
	WriteJournal(ctx context.Context, j *acting.Journal, rv string) (string, error)
	// Approved is the plan ID the operator approved, "" for none.
	Approved(ctx context.Context) (string, error)
	// Reports are the actuators' reports by node name; a record that
	// cannot be read is left out and named in bad.
	Reports(ctx context.Context) (reports map[string]*acting.Report, bad []string, err error)
	// RequestRemoval sets k3s's remove annotation on node's Node, and
	// acting.RemoveRequestedAnnotation to planID, in one patch.
	RequestRemoval(ctx context.Context, node, planID string) error
}

// SwapStore returns the swap store of fleet-role's namespace.
func (c *Client) SwapStore(namespace string) SwapStore {
	return &clientSwap{cm: configMapClient(c.rc, namespace), ns: namespace,
		nodes: nodeClient(c.rc)}
}

type clientSwap struct {
	cm    ConfigMapClient
	ns    string
	nodes *typed[*corev1.Node, *corev1.NodeList]
}

func (s *clientSwap) Journal(ctx context.Context) (*acting.Journal, string, error) {
	cm, err := s.cm.Get(ctx, acting.JournalConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("get configmap %s/%s: %w", s.ns, acting.JournalConfigMap, classify(err))
	}
	raw := cm.Data[acting.JournalKey]
	if raw == "" {
		return nil, cm.ResourceVersion, nil
	}
	j, err := acting.UnmarshalJournal([]byte(raw))
	if err != nil {
		return nil, cm.ResourceVersion, fmt.Errorf("configmap %s/%s: %w", s.ns, acting.JournalConfigMap, err)
	}
	return j, cm.ResourceVersion, nil
}

// JournalData is the journal ConfigMap's data for j: the document, and
// beside it the keys the admission policy reads (acting.JournalOutKey and
// acting.JournalPhaseKey: a policy's CEL cannot parse the document).
func JournalData(j *acting.Journal) (map[string]string, error) {
	doc, err := j.Marshal()
	if err != nil {
		return nil, err
	}
	return map[string]string{
		acting.JournalKey:      string(doc),
		acting.JournalPlanKey:  j.PlanID,
		acting.JournalOutKey:   j.Out.Node,
		acting.JournalPhaseKey: string(j.Phase),
	}, nil
}

func (s *clientSwap) WriteJournal(ctx context.Context, j *acting.Journal, rv string) (string, error) {
	data, err := JournalData(j)
	if err != nil {
		return "", err
	}
	// A merge patch that sets metadata.resourceVersion is applied only to
	// that version of the object: the API server answers 409 otherwise.
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"resourceVersion": rv}, "data": data})
	if err != nil {
		return "", fmt.Errorf("write journal: %w", err)
	}
	cm, err := s.cm.Patch(ctx, acting.JournalConfigMap, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsConflict(err) {
		return "", fmt.Errorf("write journal %s/%s at resourceVersion %s: %w: %w", s.ns, acting.JournalConfigMap, rv, ErrConflict, err)
	}
	if err != nil {
		return "", fmt.Errorf("write journal %s/%s: %w", s.ns, acting.JournalConfigMap, classify(err))
	}
	return cm.ResourceVersion, nil
}

func (s *clientSwap) Approved(ctx context.Context) (string, error) {
	cm, err := s.cm.Get(ctx, acting.ApprovalConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get configmap %s/%s: %w", s.ns, acting.ApprovalConfigMap, classify(err))
	}
	return cm.Data[acting.ApprovalKey], nil
}

// ActuatorRecordSelector selects the actuators' records.
const ActuatorRecordSelector = "fleet-role.io/record=" + acting.ActuatorRecordLabel

func (s *clientSwap) Reports(ctx context.Context) (map[string]*acting.Report, []string, error) {
	l, err := s.cm.List(ctx, metav1.ListOptions{LabelSelector: ActuatorRecordSelector})
	if err != nil {
		return nil, nil, fmt.Errorf("list the actuators' records in %s: %w", s.ns, classify(err))
	}
	reports, bad := ReadReports(l.Items)
	return reports, bad, nil
}

// ReadReports reads the actuators' records: each named after its node, its
// one key a Report. An unreadable one is named in bad, not fatal: the
// executor then sees no report from that host, as if it had not reported.
func ReadReports(items []corev1.ConfigMap) (map[string]*acting.Report, []string) {
	out := make(map[string]*acting.Report, len(items))
	var bad []string
	for _, cm := range items {
		node, ok := strings.CutPrefix(cm.Name, acting.ActuatorRecordPrefix)
		if !ok || node == "" {
			bad = append(bad, cm.Name+": not named "+acting.ActuatorRecordPrefix+"NODE")
			continue
		}
		var r acting.Report
		if err := json.Unmarshal([]byte(cm.Data[acting.ReportKey]), &r); err != nil {
			bad = append(bad, fmt.Sprintf("%s: key %s: %v", cm.Name, acting.ReportKey, err))
			continue
		}
		out[node] = &r
	}
	sort.Strings(bad)
	return out, bad
}

func (s *clientSwap) RequestRemoval(ctx context.Context, node, planID string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		acting.RemoveAnnotation: "true", acting.RemoveRequestedAnnotation: planID}}})
	if err != nil {
		return fmt.Errorf("annotate node %s: %w", node, err)
	}
	if _, err := s.nodes.Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("annotate node %s with %s: %w", node, acting.RemoveAnnotation, classify(err))
	}
	return nil
}

// ErrNoJournal: the install made no journal ConfigMap, so acting has
// nowhere to keep a swap and carries none out.
var ErrNoJournal = errors.New("no journal ConfigMap: install deploy/acting (docs/acting.md)")
