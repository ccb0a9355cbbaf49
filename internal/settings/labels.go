package settings

import "strings"

// NodeRestrictionPrefix is the label prefix a kubelet may not set on its
// own Node: the NodeRestriction admission plugin refuses a node's update
// that adds, changes or removes a label under node-restriction.kubernetes.io/
// (or a subdomain of it), and the kubelet refuses such keys in its
// --node-labels (so does k3s's --node-label, which passes them on). Labels
// under it are set by an administrator, with kubectl label, and a host that
// is compromised cannot mark itself eligible or pinned through them.
// https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#noderestriction
const NodeRestrictionPrefix = "node-restriction.kubernetes.io/"

// AdminOnlyLabel reports whether a label key is one a kubelet may not set
// on its own Node: under node-restriction.kubernetes.io/ or a subdomain of
// node-restriction.kubernetes.io, as the NodeRestriction plugin judges it.
func AdminOnlyLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	const domain = "node-restriction.kubernetes.io"
	return prefix == domain || strings.HasSuffix(prefix, "."+domain)
}

// SelfSetLabels lists the names of the settings (eligible_label,
// pinned_label) whose keys a node's kubelet may set on its own Node.
func (s Settings) SelfSetLabels() []string {
	var out []string
	if !AdminOnlyLabel(s.EligibleLabel) {
		out = append(out, "eligible_label")
	}
	if !AdminOnlyLabel(s.PinnedLabel) {
		out = append(out, "pinned_label")
	}
	return out
}
