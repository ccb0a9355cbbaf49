// Package netlab builds a network laboratory on one Linux machine: several
// hosts, each a network namespace with its own address and its own loopback,
// joined by a router namespace, with latency injected in user space and links
// that can be cut. It is what the mesh scenario stands on: real etcd members,
// probes and a kube-apiserver run as processes inside (or, with ConnectRoot,
// beside) the hosts and talk over real TCP.
//
// Why user space: this machine's kernel has no netem qdisc, and tbf delays
// only under load. So the router sends every packet to or from an impaired
// host through a TUN device that this process serves; a goroutine holds each
// packet for the sum of the delays of its source and destination hosts and
// of the link between them (SetDelay, SetLinkDelay), drops it at its ends'
// loss rates (SetLoss) or discards it on a cut link (CutLink), and writes the
// rest back for the router to forward. A TCP connect and a long-lived stream
// see it alike, because the kernel's own packets are held or lost, not a
// proxy's. LinkDown cuts a host off from everything, the router included.
//
// Topology (addresses from Config.Subnet, 198.18.0.0/24 by default):
//
//	host i  (namespace PREFIX-PID-SEQ-NAME): lo up, eth0 = subnet+2+i/32,
//	        route SUBNET via ROUTER onlink (nothing outside the lab)
//	router  (namespace PREFIX-PID-SEQ): lo = subnet+1/32, one veth hI per host,
//	        a route per host, ip_forward on, rp_filter off, TUN device "dly"
//	root    (only with ConnectRoot): a veth "nlabXXXXXXXX" with the last usable
//	        address of the subnet/32 and a route to the subnet via the router
//
// Everything needs root and Linux.
package netlab
