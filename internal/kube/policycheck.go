package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/record"
)

// ErrAdmitted: the API server admitted a write the admission policy
// fleet-role-probe-records must refuse. The records are then not protected.
var ErrAdmitted = errors.New("the API server admitted a write the admission policy fleet-role-probe-records must refuse")

// admitted is an ErrAdmitted that says what was admitted.
type admitted string

func (a admitted) Error() string        { return string(a) }
func (a admitted) Is(target error) bool { return target == ErrAdmitted }

// PolicyCheck asks the API server, with a server-side dry run that changes
// nothing, whether it refuses this probe the write the admission policy
// exists to refuse: a record not its own node's. The status and the
// settings are out of its reach by RBAC (they are in another namespace,
// where the probe may only read the settings by name), so nothing but the
// policy stands between a probe and another node's record.
type PolicyCheck interface {
	// CheckRefused returns nil when the API server refused it (403
	// Forbidden: the policy's refusal); an error wrapping ErrAdmitted that
	// names what it admitted; any other error when it could not tell
	// (unreachable, a server error, ...).
	CheckRefused(ctx context.Context, owner record.Owner) error
}

// PolicyCheck returns the check for the records of namespace.
func (c *Client) PolicyCheck(namespace string) PolicyCheck {
	return &policyCheck{c: configMapClient(c.rc, namespace), ns: namespace}
}

type policyCheck struct {
	c  ConfigMapClient
	ns string
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

// CheckRefused implements PolicyCheck with a dry run of a create of a
// record shaped as the probe's own (its labels, one entry, its own Node as
// owner) under another name. With the policy in force it is refused (403);
// without it RBAC admits it.
func (p *policyCheck) CheckRefused(ctx context.Context, owner record.Owner) error {
	dry := []string{metav1.DryRunAll}
	obj := record.Object(p.ns, owner, `{}`)
	obj.Name = foreignName(owner.Name)
	_, err := p.c.Create(ctx, obj, metav1.CreateOptions{DryRun: dry, FieldManager: fieldManager})
	switch {
	case apierrors.IsForbidden(err):
		return nil
	case err == nil, apierrors.IsAlreadyExists(err):
		// An existing name is found after admission: admitted.
		return admitted(fmt.Sprintf("the API server admitted, as a dry run, a create of ConfigMap %s/%s, a record not its own: the admission policy fleet-role-probe-records is not in force (the plugin off, its binding deleted, or never installed), and any probe could rewrite every record",
			p.ns, obj.Name))
	default:
		return fmt.Errorf("dry-run create of ConfigMap %s/%s: %w", p.ns, obj.Name, classify(err))
	}
}
