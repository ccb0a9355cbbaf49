// Package probe is the loop the fleet-role-probe DaemonSet runs on every
// node: each period it reads the Nodes once (the command reads them from an
// informer's cache), takes one sample of this host's readings, appends it to
// the node's window and writes the window to its node's record, a ConfigMap
// of its own, with a JSON merge patch of the entry alone. The write runs
// beside the loop (writeBeside): a write slower than a period, as every
// write is when etcd's leader is slow, holds no sample back, and the next
// write follows it as soon as it ends.
//
// The loop never exits on a failed reading or write: a reading that fails is
// recorded in the sample's errors, and a write the API refuses is retried the
// next period with the whole window, so no sample is lost while the API is
// away for less than a window. While the API server is away the probe goes on
// sampling with the Nodes it last read, so an outage leaves no gap in the
// window. It exits on a cancelled context, after writing what it holds.
package probe
