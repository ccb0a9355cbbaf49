package link

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/link/linktest"
)

// zoo builds one host's sysfs holding every kind of interface the walk must
// follow, with the kernel's loops.
func zoo(t *testing.T) *linktest.Tree {
	t.Helper()
	return zooAt(t, t.TempDir())
}

func zooAt(t *testing.T, root string) *linktest.Tree {
	t.Helper()
	tr := linktest.New(t, root)
	tr.WiredNIC("eth0", "0000:00:1f.6")
	tr.WiFiNIC("wlan0", "0000:00:14.3")

	// A bridge over Wi-Fi (as a 4-address station can be bridged).
	tr.WiFiNIC("wlan1", "")
	tr.Bridge("br0", "wlan1")

	// A VLAN over a bond of a wired and a Wi-Fi slave.
	tr.WiredNIC("eth1", "")
	tr.WiFiNIC("wlan2", "")
	tr.Bond("bond0", "eth1", "wlan2")
	tr.VLAN("bond0.10", "bond0")

	// A bond of two wired slaves.
	tr.WiredNIC("eth5", "")
	tr.WiredNIC("eth6", "")
	tr.Bond("bond1", "eth5", "eth6")

	// A macvlan over the wired NIC.
	tr.Macvlan("macvlan0", "eth0")

	tr.TUN("tailscale0")
	tr.WireGuard("wg0")
	tr.Veth("veth0", 1000)

	// A bridge with a wired uplink and guests' ports (veth, tap), and one
	// with guests only (docker0).
	tr.WiredNIC("eth3", "")
	tr.Veth("vethb", 1001)
	tr.TUN("tap0")
	tr.Bridge("brlan", "vethb", "eth3", "tap0")
	tr.Veth("vethd", 1002)
	tr.Bridge("docker0", "vethd")
	tr.Bridge("brempty")

	// A team on a kernel without lower_ links: members show by master only.
	tr.WiredNIC("eth4", "")
	tr.MasterOnly("team0", "eth4")

	tr.VethPair("vethp0", "vethp1")
	tr.VXLAN("vxlan0", "eth0")
	tr.VXLAN("vxlan1", "vethp0")

	tr.WiFiDeviceOnly("wlp3s0", "")
	tr.WWAN("wwan0")
	return tr
}

func TestClassifyZoo(t *testing.T) {
	tr := zoo(t)
	fsys := os.DirFS(tr.Root)
	cases := []struct {
		iface  string
		class  Class
		via    []string
		reason []string // substrings the reason must hold
	}{
		{"eth0", Wired, []string{"eth0"}, []string{"eth0 reaches physical device 0000:00:1f.6"}},
		{"wlan0", WiFi, []string{"wlan0"}, []string{"wlan0 is Wi-Fi (phy80211)"}},
		{"br0", WiFi, []string{"br0", "wlan1"}, []string{"br0 is a bridge over wlan1 (wifi)", "wlan1 is Wi-Fi"}},
		{"bond0.10", WiFi, []string{"bond0.10", "bond0", "eth1", "wlan2"}, []string{"bond0.10 sits on bond0", "bond0 is a bond over eth1 (wired), wlan2 (wifi), the worst decides", "wlan2 is Wi-Fi"}},
		{"bond1", Wired, []string{"bond1", "eth5", "eth6"}, []string{"bond1 is a bond over eth5 (wired), eth6 (wired)"}},
		{"macvlan0", Wired, []string{"macvlan0", "eth0"}, []string{"macvlan0 sits on eth0", "0000:00:1f.6"}},
		{"tailscale0", Unknown, []string{"tailscale0"}, []string{"tailscale0 stopped the walk", "TUN/TAP device (tun_flags 0x1001)"}},
		{"wg0", Unknown, []string{"wg0"}, []string{"wg0 stopped the walk", "WireGuard"}},
		{"veth0", Unknown, []string{"veth0"}, []string{"veth0 stopped the walk", "iflink (1000)", "names no interface in this sysfs", "veth pair"}},
		{"vethp0", Unknown, []string{"vethp0"}, []string{"vethp0 stopped the walk: one end of a veth pair whose other end, vethp1"}},
		{"vxlan0", Wired, []string{"vxlan0", "eth0"}, []string{"vxlan0 sits on eth0; eth0 reaches physical device 0000:00:1f.6"}},
		{"vxlan1", Unknown, []string{"vxlan1", "vethp0"}, []string{"vxlan1 sits on vethp0; vethp0 stopped the walk", "vethp1"}},
		{"brlan", Wired, []string{"brlan", "eth3", "tap0", "vethb"}, []string{"ports that reach no physical device (tap0, vethb)", "are left out", "eth3 reaches physical device"}},
		{"docker0", Unknown, []string{"docker0", "vethd"}, []string{"docker0 is a bridge over vethd (unknown)", "vethd stopped the walk", "veth pair"}},
		{"brempty", Unknown, []string{"brempty"}, []string{"brempty stopped the walk: a bridge with no ports"}},
		{"team0", Wired, []string{"team0", "eth4"}, []string{"team0 sits on eth4", "eth4 reaches physical device"}},
		{"wlp3s0", WiFi, []string{"wlp3s0"}, []string{"its device has ieee80211/"}},
		{"wwan0", Unknown, []string{"wwan0"}, []string{"mobile broadband", "DEVTYPE=wwan"}},
		{"lo", Unknown, []string{"lo"}, []string{"loopback"}},
		{"nosuch0", Unknown, []string{"nosuch0"}, []string{"nosuch0 is not in class/net"}},
	}
	for _, c := range cases {
		t.Run(c.iface, func(t *testing.T) {
			res, err := Classify(fsys, c.iface)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s via %v: %s", c.iface, res.Class, res.Via, res.Reason)
			if res.Class != c.class {
				t.Errorf("class %s, want %s (reason: %s)", res.Class, c.class, res.Reason)
			}
			if !slices.Equal(res.Via, c.via) {
				t.Errorf("via %v, want %v", res.Via, c.via)
			}
			for _, s := range c.reason {
				if !strings.Contains(res.Reason, s) {
					t.Errorf("reason %q lacks %q", res.Reason, s)
				}
			}
		})
	}
}

// The fixture really has the kernel's loops: following the links a generic
// walker would follow leads back to where it started.
func TestZooHasKernelLoops(t *testing.T) {
	tr := zoo(t)
	for _, loop := range []struct{ from, through string }{
		{"class/net/eth0", "class/net/eth0/device/net/eth0/device/net/eth0"},
		{"class/net/eth0", "class/net/eth0/subsystem/eth0"},
		{"class/net/br0", "class/net/br0/brif/wlan1/bridge"},
		{"class/net/br0", "class/net/br0/lower_wlan1/master"},
		{"class/net/br0", "class/net/br0/lower_wlan1/upper_br0"},
		{"class/net/bond0", "class/net/bond0/lower_wlan2/master"},
		{"devices/pci0000:00/0000:00:1f.6", "class/net/eth0/device/driver/0000:00:1f.6"},
	} {
		a, err := filepath.EvalSymlinks(filepath.Join(tr.Root, loop.from))
		if err != nil {
			t.Fatal(err)
		}
		b, err := filepath.EvalSymlinks(filepath.Join(tr.Root, loop.through))
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s resolves to %s, not back to %s", loop.through, b, a)
		}
	}
}

// Links the kernel never makes, a cycle of lower_ links and a self-link,
// still end the walk, with the loop named.
func TestClassifyLowerCycle(t *testing.T) {
	tr := linktest.New(t, t.TempDir())
	tr.Virtual("a0", "")
	tr.Virtual("b0", "")
	tr.Stack("a0", "b0")
	tr.Stack("b0", "a0")
	tr.Virtual("self0", "")
	tr.Stack("self0", "self0")

	res, err := Classify(os.DirFS(tr.Root), "a0")
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != Unknown || !slices.Equal(res.Via, []string{"a0", "b0"}) || !strings.Contains(res.Reason, "b0 stopped the walk: its members (a0) were already walked, a loop") {
		t.Errorf("cycle: %+v", res)
	}
	// A link to itself is no member at all.
	res, err = Classify(os.DirFS(tr.Root), "self0")
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != Unknown || !slices.Equal(res.Via, []string{"self0"}) || !strings.Contains(res.Reason, "self0 stopped the walk: no device link") {
		t.Errorf("self link: %+v", res)
	}
}

// A stack as high as the kernel allows (MAX_NEST_DEV devices) is walked to
// its bottom; one device higher is not.
func TestClassifyStackDepth(t *testing.T) {
	for _, c := range []struct {
		devices int
		class   Class
	}{
		{maxNestDev - 1, Wired},
		{maxNestDev, Wired},
		{maxNestDev + 1, Unknown},
	} {
		t.Run(fmt.Sprintf("%d devices", c.devices), func(t *testing.T) {
			tr := linktest.New(t, t.TempDir())
			tr.WiredNIC("eth0", "")
			lower := "eth0"
			for i := 1; i < c.devices; i++ {
				name := fmt.Sprintf("v%d", i)
				tr.VLAN(name, lower)
				lower = name
			}
			res, err := Classify(os.DirFS(tr.Root), lower)
			if err != nil {
				t.Fatal(err)
			}
			if res.Class != c.class {
				t.Fatalf("class %s, want %s: %s", res.Class, c.class, res.Reason)
			}
			if c.class == Unknown && !strings.Contains(res.Reason, fmt.Sprintf("a stack of %d devices, more than the kernel allows (MAX_NEST_DEV %d)", c.devices, maxNestDev)) {
				t.Errorf("reason %q", res.Reason)
			}
			if c.class == Wired && len(res.Via) != c.devices {
				t.Errorf("via %v: want %d interfaces", res.Via, c.devices)
			}
		})
	}
}

// A sysfs with no class/net cannot be read at all: an error, not a class.
func TestClassifyNoSysfs(t *testing.T) {
	_, err := Classify(os.DirFS(t.TempDir()), "eth0")
	if err == nil || !strings.Contains(err.Error(), "read class/net") {
		t.Fatalf("err %v", err)
	}
}

// A device link that dangles is not a physical device that can be vouched
// for.
func TestClassifyDanglingDevice(t *testing.T) {
	tr := linktest.New(t, t.TempDir())
	dir := tr.Virtual("eth9", "")
	tr.Link(dir+"/device", "devices/pci0000:00/0000:09:00.0")
	res, err := Classify(os.DirFS(tr.Root), "eth9")
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != Unknown || !strings.Contains(res.Reason, "eth9 stopped the walk: its device link does not resolve") {
		t.Errorf("%+v", res)
	}
}
