package link

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// ErrNoDefaultRoute says the route tables hold no usable default route: the
// host has no way off its own networks, which is a finding, not a failure to
// read.
var ErrNoDefaultRoute = errors.New("no default route")

// Route flags as the kernel prints them (include/uapi/linux/route.h and
// include/uapi/linux/ipv6_route.h).
const (
	flagUp     = 0x0001 // RTF_UP: the route is usable
	flagReject = 0x0200 // RTF_REJECT: unreachable or prohibit, packets are refused
)

// maxLineBytes bounds one line of a route table. The kernel pads IPv4 lines
// to 127 characters and an IPv6 line is 149 plus the interface name (at most
// IFNAMSIZ-1 = 15): anything near a page is not a route table.
const maxLineBytes = 4096

// Route is one entry of /proc/net/route or /proc/net/ipv6_route.
type Route struct {
	Interface   string       // the output device; "*" for a route without one
	Destination netip.Prefix // 0.0.0.0/0 or ::/0 for a default route
	Source      netip.Prefix // IPv6 source-specific routes only; invalid for IPv4
	Gateway     netip.Addr   // unspecified (0.0.0.0 or ::) when the route has none
	Metric      uint32
	Flags       uint32 // RTF_* as the kernel prints them
}

// IsDefault reports whether the route is a default route: it covers every
// destination from every source and is up. It may still discard packets
// (Discards).
func (r Route) IsDefault() bool {
	if !r.Destination.IsValid() || r.Destination.Bits() != 0 {
		return false
	}
	// A source-specific ::/0 (ip -6 route add default from X) serves only
	// packets from X, so it is not the way off the host for everything.
	if r.Source.IsValid() && r.Source.Bits() != 0 {
		return false
	}
	return r.Flags&flagUp != 0
}

// Discards reports whether the route refuses or drops what it matches: an
// unreachable or prohibit route (RTF_REJECT), or a blackhole, which has no
// output device and which the kernel prints with the device "*".
func (r Route) Discards() bool {
	return r.Flags&flagReject != 0 || r.Interface == "" || r.Interface == "*"
}

// DefaultRoute picks the default route the kernel uses: the default with the
// lowest metric, the first listed on a tie (the kernel lists a table in the
// order it searches it). It returns an error wrapping ErrNoDefaultRoute when
// there is none, or when the one the kernel would use discards packets
// (ip route add unreachable default), since then nothing leaves by it.
func DefaultRoute(routes []Route) (Route, error) {
	best := -1
	for i, r := range routes {
		if !r.IsDefault() {
			continue
		}
		if best < 0 || r.Metric < routes[best].Metric {
			best = i
		}
	}
	if best < 0 {
		return Route{}, ErrNoDefaultRoute
	}
	if r := routes[best]; r.Discards() {
		return Route{}, fmt.Errorf("%w: the default route with the lowest metric (%d) discards packets (unreachable, prohibit or blackhole)", ErrNoDefaultRoute, r.Metric)
	}
	return routes[best], nil
}

// ParseRoutes parses /proc/net/route, the IPv4 main table. Addresses are
// printed as the hex of a 32-bit word in the host's byte order (so
// little-endian on x86 and arm64: 192.0.2.1 reads 010200C0), the flags in
// hex and the metric in decimal.
func ParseRoutes(r io.Reader) ([]Route, error) {
	var routes []Route
	err := eachLine(r, func(n int, fields []string) error {
		if n == 1 && fields[0] == "Iface" {
			return nil // the header
		}
		if len(fields) != 11 {
			return fmt.Errorf("%d fields, want 11 (Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT)", len(fields))
		}
		dst, err := parseIPv4Word(fields[1])
		if err != nil {
			return fmt.Errorf("destination: %w", err)
		}
		gw, err := parseIPv4Word(fields[2])
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		flags, err := strconv.ParseUint(fields[3], 16, 32)
		if err != nil {
			return fmt.Errorf("flags: %w", err)
		}
		metric, err := strconv.ParseUint(fields[6], 10, 32)
		if err != nil {
			return fmt.Errorf("metric: %w", err)
		}
		mask, err := parseIPv4Word(fields[7])
		if err != nil {
			return fmt.Errorf("mask: %w", err)
		}
		bits, err := maskBits(mask)
		if err != nil {
			return err
		}
		prefix, err := dst.Prefix(bits)
		if err != nil {
			return fmt.Errorf("destination %s/%d: %w", dst, bits, err)
		}
		routes = append(routes, Route{
			Interface:   fields[0],
			Destination: prefix,
			Gateway:     gw,
			Metric:      uint32(metric),
			Flags:       uint32(flags),
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return routes, nil
}

// ParseIPv6Routes parses /proc/net/ipv6_route: destination, its prefix
// length, source, its prefix length, next hop, metric, reference count, use
// count and flags, all in hex with addresses in network order, then the
// device name.
func ParseIPv6Routes(r io.Reader) ([]Route, error) {
	var routes []Route
	err := eachLine(r, func(_ int, fields []string) error {
		if len(fields) != 10 {
			return fmt.Errorf("%d fields, want 10 (dst dst_len src src_len next_hop metric refcnt use flags device)", len(fields))
		}
		dst, err := parseIPv6Prefix(fields[0], fields[1])
		if err != nil {
			return fmt.Errorf("destination: %w", err)
		}
		src, err := parseIPv6Prefix(fields[2], fields[3])
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		gw, err := parseIPv6Addr(fields[4])
		if err != nil {
			return fmt.Errorf("next hop: %w", err)
		}
		metric, err := parseHex32(fields[5])
		if err != nil {
			return fmt.Errorf("metric: %w", err)
		}
		flags, err := parseHex32(fields[8])
		if err != nil {
			return fmt.Errorf("flags: %w", err)
		}
		routes = append(routes, Route{
			Interface:   fields[9],
			Destination: dst,
			Source:      src,
			Gateway:     gw,
			Metric:      metric,
			Flags:       flags,
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return routes, nil
}

// eachLine calls fn with the fields of every non-blank line, numbered from 1,
// and names the line in any error.
func eachLine(r io.Reader, fn func(n int, fields []string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if err := fn(n, fields); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	return nil
}

// parseIPv4Word reads an address the kernel printed with %08X from a
// big-endian __be32 held in a host-order word: the bytes come out in the
// host's order, which NativeEndian undoes.
func parseIPv4Word(s string) (netip.Addr, error) {
	if len(s) != 8 {
		return netip.Addr{}, fmt.Errorf("%q is not 8 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return netip.Addr{}, err
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(v))
	return netip.AddrFrom4(b), nil
}

// maskBits turns a netmask into a prefix length, refusing a mask whose ones
// are not contiguous (the kernel never prints one).
func maskBits(mask netip.Addr) (int, error) {
	b := mask.As4()
	v := binary.BigEndian.Uint32(b[:])
	ones := 0
	for v&0x80000000 != 0 {
		ones++
		v <<= 1
	}
	if v != 0 {
		return 0, fmt.Errorf("mask %s is not contiguous", mask)
	}
	return ones, nil
}

func parseIPv6Addr(s string) (netip.Addr, error) {
	if len(s) != 32 {
		return netip.Addr{}, fmt.Errorf("%q is not 32 hex digits", s)
	}
	var b [16]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return netip.Addr{}, fmt.Errorf("%q: %w", s, err)
	}
	return netip.AddrFrom16(b), nil
}

func parseIPv6Prefix(addr, length string) (netip.Prefix, error) {
	a, err := parseIPv6Addr(addr)
	if err != nil {
		return netip.Prefix{}, err
	}
	if len(length) != 2 {
		return netip.Prefix{}, fmt.Errorf("prefix length %q is not 2 hex digits", length)
	}
	bits, err := strconv.ParseUint(length, 16, 8)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("prefix length: %w", err)
	}
	p, err := a.Prefix(int(bits))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s/%d: %w", a, bits, err)
	}
	return p, nil
}

func parseHex32(s string) (uint32, error) {
	if len(s) != 8 {
		return 0, fmt.Errorf("%q is not 8 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 32)
	return uint32(v), err
}
