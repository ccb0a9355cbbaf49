// Package status is fleet-role's status document: the decision as the
// controller publishes it in the fleet-role-status ConfigMap (schema
// fleet-role.io/status/v1, docs/status.md). It holds the document's types,
// its vocabulary (roles, verdicts, the signals of a host's reasons, the
// steps and gates of the plan, the codes that say why each reason came out
// as it did), the forms that fit one ConfigMap, the table `fleet-role
// status` prints, the fingerprint that tells a change from ages growing, and
// the words shared by every reader (FormatValue, Printable, Summary).
//
// The decision core (internal/decide) writes a Status; the probe, the
// alerts, the Node events, the status page and the CLI read one without
// linking the core.
package status
