// Package link holds internal/link's reading of the default route's link to
// what iproute2 says: on this host, and in a network namespace (root) with a
// veth, a bridge, a macvlan, a TUN device and a VXLAN.
package link
