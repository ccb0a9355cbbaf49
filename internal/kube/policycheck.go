package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/record"
)

// ErrAdmitted: the API server admitted a write the admission policy
// fleet-role-probe-records must refuse. The records are then not protected.
var ErrAdmitted = errors.New("the API server admitted a write the admission policy fleet-role-probe-records must refuse")

// admitted is an ErrAdmitted that says what was admitted.
type admitted string

func (a admitted) Error() string        { return string(a) }
func (a admitted) Is(target error) bool { return target == ErrAdmitted }

// PolicyCheck asks the API server, with server-side dry runs that change
// nothing, whether it refuses this probe the writes the admission policy
// exists to refuse: a record not its own node's, and the status.
type PolicyCheck interface {
	// CheckRefused returns nil when the API server refused every one (403
	// Forbidden: the policy's refusal, or RBAC's), a status that is gone
	// counting as refused when the create was; an error wrapping
	// ErrAdmitted that names what it admitted; any other error when it
	// could not tell (unreachable, a server error, ...).
	CheckRefused(ctx context.Context, owner record.Owner) error
}

// PolicyCheck returns the check for the records of namespace, whose status
// ConfigMap is status.
func (c *Client) PolicyCheck(namespace, status string) PolicyCheck {
	return &policyCheck{c: configMapClient(c.rc, namespace), ns: namespace, status: status}
}

type policyCheck struct {
	c          ConfigMapClient
	ns, status string
}

// foreignName is a ConfigMap name that is owner's node's record name with a
// suffix: never its own record, whatever the nodes are called, and within
// the 253 characters of a name.
func foreignName(node string) string {
	const suffix = ".fleet-role-policy-check"
	if len(node)+len(suffix) > 253 {
		node = node[:253-len(suffix)]
	}
	return node + suffix
}

// CheckRefused implements PolicyCheck with two dry runs: a create of a
// record shaped as the probe's own (its labels, one entry, its own Node as
// owner) under another name, and a merge patch of the status's data. With
// the policy in force both are refused (403); without it RBAC admits both.
func (p *policyCheck) CheckRefused(ctx context.Context, owner record.Owner) error {
	dry := []string{metav1.DryRunAll}
	obj := record.Object(p.ns, owner, `{}`)
	obj.Name = foreignName(owner.Name)
	var what []string
	_, err := p.c.Create(ctx, obj, metav1.CreateOptions{DryRun: dry, FieldManager: fieldManager})
	switch {
	case apierrors.IsForbidden(err):
	case err == nil, apierrors.IsAlreadyExists(err):
		// An existing name is found after admission: admitted.
		what = append(what, fmt.Sprintf("a create of ConfigMap %s/%s, a record not its own", p.ns, obj.Name))
	default:
		return fmt.Errorf("dry-run create of ConfigMap %s/%s: %w", p.ns, obj.Name, classify(err))
	}
	_, err = p.c.Patch(ctx, p.status, types.MergePatchType, []byte(`{"data":{"status.json":"{}"}}`),
		metav1.PatchOptions{DryRun: dry, FieldManager: fieldManager})
	switch {
	case apierrors.IsForbidden(err):
	case apierrors.IsNotFound(err):
		// The status is gone (deleted; its leader makes it anew at its next
		// write): a patch of it is answered before admission, so it tells
		// nothing of the policy, and the create's refusal, by the same
		// policy and binding, stands for both. Failing here would leave a
		// probe started meanwhile writing nothing until the install is
		// applied again.
	case err == nil:
		what = append(what, fmt.Sprintf("a patch of ConfigMap %s/%s, the status", p.ns, p.status))
	default:
		return fmt.Errorf("dry-run patch of ConfigMap %s/%s: %w", p.ns, p.status, classify(err))
	}
	if len(what) > 0 {
		return admitted(fmt.Sprintf("the API server admitted, as dry runs, %s: the admission policy fleet-role-probe-records is not in force (the plugin off, its binding deleted, or never installed), and any probe could rewrite every record",
			strings.Join(what, " and ")))
	}
	return nil
}
