// Package link reads which interface a host's default route leaves by and
// whether that interface's link is wired, Wi-Fi or cannot be seen: a voter on
// Wi-Fi, or behind a link nobody can vouch for, loses heartbeats that a wired
// one would not.
//
// The parsers (ParseRoutes, ParseIPv6Routes) and the sysfs walk (Classify)
// are pure, over a reader and an fs.FS; Read is the thin reader of a host,
// under a host root so that a DaemonSet can read the host's /proc and /sys
// mounted at /host.
package link

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Family names the route table a default route came from.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
)

// Reading is one link reading: the default route's interface and its class.
type Reading struct {
	Interface string   `json:"interface"`
	Family    string   `json:"family"`            // ipv4, or ipv6 when there is no IPv4 default
	Gateway   string   `json:"gateway,omitempty"` // empty for a route with no gateway (point-to-point, a TUN)
	Metric    uint32   `json:"metric"`
	Class     Class    `json:"class"`
	Via       []string `json:"via"`
	Reason    string   `json:"reason"`
}

// Read takes a link reading of the host whose root file system is at
// hostRoot ("/" for this host): the default route from
// <hostRoot>/proc/net/route, or <hostRoot>/proc/net/ipv6_route when IPv4 has
// none, classified from <hostRoot>/sys. /proc/net is the reading process's
// own network namespace, so a probe in a pod needs the host's network
// (hostNetwork). It returns an error wrapping ErrNoDefaultRoute when neither
// table has a default route.
func Read(hostRoot string) (Reading, error) {
	route, family, err := ReadDefaultRoute(hostRoot)
	if err != nil {
		return Reading{}, err
	}
	sys := filepath.Join(hostRoot, "sys")
	res, err := Classify(os.DirFS(sys), route.Interface)
	if err != nil {
		return Reading{}, fmt.Errorf("classify %s under %s: %w", route.Interface, sys, err)
	}
	r := Reading{
		Interface: route.Interface,
		Family:    family,
		Metric:    route.Metric,
		Class:     res.Class,
		Via:       res.Via,
		Reason:    res.Reason,
	}
	if route.Gateway.IsValid() && !route.Gateway.IsUnspecified() {
		r.Gateway = route.Gateway.String()
	}
	return r, nil
}

// ReadDefaultRoute returns the default route of the host under hostRoot and
// the family of the table it came from: IPv4's when it has one, else IPv6's.
// A host without IPv6 has no ipv6_route file, which is no route, not an error.
func ReadDefaultRoute(hostRoot string) (Route, string, error) {
	v4 := filepath.Join(hostRoot, "proc/net/route")
	routes, err := readRoutes(v4, ParseRoutes)
	if err != nil {
		return Route{}, "", err
	}
	r, err4 := DefaultRoute(routes)
	if err4 == nil {
		return r, IPv4, nil
	}
	v6 := filepath.Join(hostRoot, "proc/net/ipv6_route")
	routes, err = readRoutes(v6, ParseIPv6Routes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Route{}, "", err
	}
	r, err6 := DefaultRoute(routes)
	if err6 == nil {
		return r, IPv6, nil
	}
	return Route{}, "", fmt.Errorf("%s: %v; %s: %w", v4, err4, v6, err6)
}

func readRoutes(p string, parse func(r io.Reader) ([]Route, error)) ([]Route, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, unwrapPath(err))
	}
	defer f.Close()
	routes, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	return routes, nil
}

// unwrapPath drops an *fs.PathError's own "open PATH" so that the error names
// the path once; errors.Is still sees the errno beneath.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
