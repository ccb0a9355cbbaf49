// Package acting carries out the swap the decision names, through k3s's own
// mechanisms, add first and one change at a time (docs/acting.md).
//
// It is pure, like the decision core it follows: the plan (Draft) and the
// executor (Next) take what the controller observed and the time, and
// return the step table, the journal to write and the one change to make.
// The controller reads the cluster and writes the journal, the remove
// annotation and the status; the actuator on a host does what only that
// host can, reading its command from the journal. Steps and guards carry
// stable codes, and prose is written last, in Detail and Basis, which
// nothing steers by.
package acting
