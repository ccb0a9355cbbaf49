package link

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/link"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// ipRoute is what `ip -j route show default` says of one route.
type ipRoute struct {
	Dev    string `json:"dev"`
	Type   string `json:"type"`
	Metric uint32 `json:"metric"`
}

// ipDefault names the interface iproute2 says the default route leaves by,
// taking the lowest metric as the kernel does, IPv4 first. args come before
// "route" (e.g. -n NS).
func ipDefault(t *testing.T, args ...string) (dev, family string) {
	t.Helper()
	for _, fam := range []struct{ flag, name string }{{"-4", link.IPv4}, {"-6", link.IPv6}} {
		out := run(t, "ip", append(append([]string{"-j", fam.flag}, args...), "route", "show", "default")...)
		var routes []ipRoute
		if err := json.Unmarshal([]byte(out), &routes); err != nil {
			t.Fatalf("ip route: %v: %s", err, out)
		}
		best := -1
		for i, r := range routes {
			if r.Type != "" && r.Type != "unicast" {
				continue
			}
			if best < 0 || r.Metric < routes[best].Metric {
				best = i
			}
		}
		if best >= 0 {
			return routes[best].Dev, fam.name
		}
	}
	return "", ""
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The machine's own /proc and /sys: the interface must be the one iproute2
// names, and the class what sysfs and the kernel's own link details show.
func TestReadThisHost(t *testing.T) {
	dev, family := ipDefault(t)
	r, err := link.Read("/")
	if dev == "" {
		if err == nil {
			t.Fatalf("ip names no default route, Read says %+v", r)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this host: %+v", r)
	if r.Interface != dev || r.Family != family {
		t.Fatalf("Read says %s (%s), ip route show default says %s (%s)", r.Interface, r.Family, dev, family)
	}
	if len(r.Via) == 0 || r.Via[0] != dev {
		t.Errorf("via %v does not start at %s", r.Via, dev)
	}

	// What the kernel says of the link, through rtnetlink rather than sysfs.
	var links []struct {
		ParentDev string `json:"parentdev"`
		LinkInfo  struct {
			Kind string `json:"info_kind"`
		} `json:"linkinfo"`
	}
	if err := json.Unmarshal([]byte(run(t, "ip", "-d", "-j", "link", "show", "dev", dev)), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip link show %s: %v", dev, err)
	}
	sys := filepath.Join("/sys/class/net", dev)
	wireless := exists(sys+"/phy80211") || exists(sys+"/wireless")
	switch {
	case wireless:
		if r.Class != link.WiFi {
			t.Errorf("%s has phy80211 or wireless/ in sysfs, class %s", dev, r.Class)
		}
	case links[0].ParentDev != "":
		// A physical device; its wireless parts would show at its ieee80211/.
		want := link.Wired
		if exists(sys + "/device/ieee80211") {
			want = link.WiFi
		}
		if r.Class != want || !strings.Contains(r.Reason, links[0].ParentDev) {
			t.Errorf("%s sits on device %s (ip link), reading %s: %s", dev, links[0].ParentDev, r.Class, r.Reason)
		}
	case slices.Contains([]string{"veth", "tun", "wireguard"}, links[0].LinkInfo.Kind):
		if r.Class != link.Unknown {
			t.Errorf("%s is a %s, class %s", dev, links[0].LinkInfo.Kind, r.Class)
		}
	default:
		// A stack (bridge, bond, VLAN, ...): walked below the interface.
		if len(r.Via) < 2 && r.Class != link.Unknown {
			t.Errorf("%s is a %q with no device, yet class %s without walking below it", dev, links[0].LinkInfo.Kind, r.Class)
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// The real kernel's sysfs and route tables, in a network namespace the test
// makes: veth, a bridge over a veth, a macvlan over a veth, a TUN device, a
// VXLAN bound to a veth, and an IPv6-only default, each read the way the probe reads a host root.
func TestReadNetns(t *testing.T) {
	testenv.RequireRoot(t)
	ns := fmt.Sprintf("fr-link-%d", os.Getpid())
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ipn := func(args ...string) { t.Helper(); run(t, "ip", append([]string{"-n", ns}, args...)...) }
	ipn("link", "add", "vA", "type", "veth", "peer", "name", "vB")
	ipn("link", "add", "vC", "type", "veth", "peer", "name", "vD")
	ipn("link", "add", "br0", "type", "bridge")
	ipn("link", "set", "vD", "master", "br0")
	ipn("link", "add", "mv0", "link", "vA", "type", "macvlan")
	ipn("tuntap", "add", "tun0", "mode", "tun")
	ipn("link", "add", "vxlan0", "type", "vxlan", "id", "42", "dstport", "4789", "dev", "vC")
	for _, d := range []string{"lo", "vA", "vB", "vC", "vD", "br0", "mv0", "tun0", "vxlan0"} {
		ipn("link", "set", d, "up")
	}

	// The namespace's own /proc/net (a process inside it) and its own sysfs
	// (mounted from inside it), under one root.
	root := t.TempDir()
	sleeper := exec.Command("ip", "netns", "exec", ns, "sleep", "3600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fmt.Sprintf("/proc/%d/net", sleeper.Process.Pid), filepath.Join(root, "proc/net")); err != nil {
		t.Fatal(err)
	}
	sys := filepath.Join(root, "sys")
	if err := os.Mkdir(sys, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "nsenter", "--net=/run/netns/"+ns, "mount", "-t", "sysfs", "none", sys)
	t.Cleanup(func() { exec.Command("umount", sys).Run() })

	for _, c := range []struct {
		dev    string
		via    []string
		reason string
	}{
		{"vA", []string{"vA"}, "vA stopped the walk: one end of a veth pair whose other end, vB"},
		{"vxlan0", []string{"vxlan0", "vC"}, "vxlan0 sits on vC; vC stopped the walk: one end of a veth pair whose other end, vD"},
		{"br0", []string{"br0", "vD"}, "vD stopped the walk"},
		{"mv0", []string{"mv0", "vA"}, "mv0 sits on vA; vA stopped the walk"},
		{"tun0", []string{"tun0"}, "tun0 stopped the walk: a TUN/TAP device"},
	} {
		t.Run(c.dev, func(t *testing.T) {
			ipn("route", "replace", "default", "dev", c.dev)
			dev, family := ipDefault(t, "-n", ns)
			r, err := link.Read(root)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", r)
			if r.Interface != dev || dev != c.dev || r.Family != family || family != link.IPv4 {
				t.Fatalf("Read says %s (%s), ip says %s (%s), want %s", r.Interface, r.Family, dev, family, c.dev)
			}
			if r.Class != link.Unknown || !slices.Equal(r.Via, c.via) || !strings.Contains(r.Reason, c.reason) {
				t.Errorf("got %s via %v: %s; want unknown via %v: %q", r.Class, r.Via, r.Reason, c.via, c.reason)
			}
		})
	}
	t.Run("ipv6 only", func(t *testing.T) {
		ipn("route", "del", "default")
		ipn("-6", "route", "add", "default", "dev", "br0", "metric", "300")
		ipn("-6", "route", "add", "default", "dev", "vC", "metric", "200")
		dev, family := ipDefault(t, "-n", ns)
		r, err := link.Read(root)
		if err != nil {
			t.Fatal(err)
		}
		if r.Interface != dev || dev != "vC" || r.Family != family || family != link.IPv6 {
			t.Fatalf("Read says %s (%s), ip says %s (%s), want vC (ipv6, the lower metric)", r.Interface, r.Family, dev, family)
		}
	})
	t.Run("no default", func(t *testing.T) {
		ipn("-6", "route", "flush", "default")
		if _, err := link.Read(root); err == nil || !strings.Contains(err.Error(), link.ErrNoDefaultRoute.Error()) {
			t.Fatalf("err %v, want no default route", err)
		}
	})
}
