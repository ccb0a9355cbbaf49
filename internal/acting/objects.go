package acting

import "fmt"

// The objects acting reads and writes in fleet-role's namespace besides
// the status (docs/acting.md, "The objects"). Each is a ConfigMap, so that
// the install needs no CRD, and each has one writer, which admission
// policies enforce (deploy/acting).
const (
	// JournalConfigMap holds the swap under way: JournalKey the journal's
	// document, and beside it, for the admission policy that lets the
	// controller annotate only the leaving voter's Node (a policy's CEL
	// cannot parse JSON), the leaving voter's name and the phase as plain
	// keys. Only the controller writes it.
	JournalConfigMap = "fleet-role-swap"
	JournalOutKey    = "out"
	JournalPhaseKey  = "phase"
	JournalPlanKey   = "plan_id"

	// ApprovalConfigMap holds the operator's approval: ApprovalKey the
	// plan ID approved. `kubectl fleet-role approve PLAN` writes it; only
	// those the Role fleet-role-approver is bound to may.
	ApprovalConfigMap = "fleet-role-approval"
	ApprovalKey       = "plan_id"

	// Each host's actuator reports what it last did in a ConfigMap of its
	// own, ActuatorRecordPrefix + the node's name, labelled
	// fleet-role.io/record=ActuatorRecordLabel, its one data key ReportKey
	// holding a Report as JSON.
	ActuatorRecordPrefix = "fleet-role-actuator."
	ActuatorRecordLabel  = "actuator"
	ReportKey            = "report"
)

// maxObjectName is the longest name the API server takes for a ConfigMap (a
// DNS subdomain, RFC 1123).
const maxObjectName = 253

// ActuatorRecordName is the name of node's actuator record; an error when
// the node's name is too long to make one.
func ActuatorRecordName(node string) (string, error) {
	name := ActuatorRecordPrefix + node
	if len(name) > maxObjectName {
		return "", fmt.Errorf("node %q: its actuator record %s%s... would be %d characters, over a ConfigMap name's %d (node names of at most %d characters)",
			node, ActuatorRecordPrefix, node[:16], len(name), maxObjectName, maxObjectName-len(ActuatorRecordPrefix))
	}
	return name, nil
}
