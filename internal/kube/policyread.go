package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// PolicyName is the admission policy that holds each probe to its own
// record, and its binding's name (deploy/base/admission.yaml).
const PolicyName = "fleet-role-probe-records"

// PolicyState is what the controller read of the admission policy and its
// binding: in force as the install makes them, or why not.
type PolicyState struct {
	InForce bool
	Why     string // what is not as installed; empty when in force
}

// PolicyReader reads the admission policy and its binding for the
// controller, which checks for itself, beside the probes' dry runs, that
// the records are protected (docs/records.md, Fail closed).
type PolicyReader interface {
	// Read returns the policy's state, or an error when it could not read
	// it (unreachable, or forbidden to an install without the grant).
	Read(ctx context.Context) (PolicyState, error)
}

// PolicyReader returns the reader, by two GETs of the objects by name (a
// ClusterRole grants them by name alone). The objects are read as JSON
// into the few fields judged, so that the binary links no
// admissionregistration types.
func (c *Client) PolicyReader() PolicyReader { return &policyReader{rc: c.rc} }

type policyReader struct{ rc rest.Interface }

// policyJSON and bindingJSON are the fields of a ValidatingAdmissionPolicy
// and its binding that decide whether the policy holds every probe write.
type policyJSON struct {
	Spec struct {
		FailurePolicy *string `json:"failurePolicy"`
	} `json:"spec"`
}

type bindingJSON struct {
	Spec struct {
		PolicyName        string          `json:"policyName"`
		ValidationActions []string        `json:"validationActions"`
		ParamRef          json.RawMessage `json:"paramRef"`
		MatchResources    json.RawMessage `json:"matchResources"`
	} `json:"spec"`
}

const policyPath = "/apis/admissionregistration.k8s.io/v1/"

func (r *policyReader) Read(ctx context.Context) (PolicyState, error) {
	var p policyJSON
	if gone, err := r.get(ctx, "validatingadmissionpolicies", &p); err != nil {
		return PolicyState{}, err
	} else if gone {
		return PolicyState{Why: "the ValidatingAdmissionPolicy " + PolicyName + " is gone"}, nil
	}
	var b bindingJSON
	if gone, err := r.get(ctx, "validatingadmissionpolicybindings", &b); err != nil {
		return PolicyState{}, err
	} else if gone {
		return PolicyState{Why: "the ValidatingAdmissionPolicyBinding " + PolicyName + " is gone"}, nil
	}
	return judgePolicy(p, b), nil
}

// judgePolicy says whether the policy and binding hold every probe write
// as the install makes them: the policy fails closed (an expression that
// errs refuses, rather than admits), and the binding binds this policy,
// denies, takes no parameters and narrows nothing.
func judgePolicy(p policyJSON, b bindingJSON) PolicyState {
	var not []string
	if fp := p.Spec.FailurePolicy; fp != nil && *fp != "Fail" {
		not = append(not, fmt.Sprintf("the policy's failurePolicy is %s, not Fail", *fp))
	}
	if b.Spec.PolicyName != PolicyName {
		not = append(not, fmt.Sprintf("the binding binds policy %q, not %s", b.Spec.PolicyName, PolicyName))
	}
	if !slices.Contains(b.Spec.ValidationActions, "Deny") {
		not = append(not, fmt.Sprintf("the binding's validationActions %v do not Deny", b.Spec.ValidationActions))
	}
	if isSet(b.Spec.ParamRef) {
		not = append(not, "the binding takes parameters (paramRef), which the policy has none of")
	}
	if isSet(b.Spec.MatchResources) {
		not = append(not, "the binding narrows what it matches (matchResources), which the install leaves whole")
	}
	if len(not) > 0 {
		return PolicyState{Why: strings.Join(not, "; ")}
	}
	return PolicyState{InForce: true}
}

func isSet(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "{}"
}

// get reads one object by name into v; gone is true when it is not there.
func (r *policyReader) get(ctx context.Context, resource string, v any) (gone bool, err error) {
	// resourceVersion 0: served from the API server's watch cache, not a
	// quorum read of etcd. The check runs beside every decision, and a
	// quorum read waits on etcd's leader, which may be the very voter
	// fleet-role is there to find slow; the cache lags etcd by a watch
	// event, well under entry_unchanged.
	//
	// Asked for as JSON, which it reads itself: the client accepts
	// protobuf from the API server by default (client.go), which serves
	// these types in it too.
	raw, err := r.rc.Get().AbsPath(policyPath+resource+"/"+PolicyName).Param("resourceVersion", "0").
		SetHeader("Accept", runtime.ContentTypeJSON).DoRaw(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get %s %s: %w", resource, PolicyName, classify(err))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("read %s %s: %w", resource, PolicyName, err)
	}
	return false, nil
}
