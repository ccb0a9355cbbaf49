// Package linktest builds sysfs trees shaped like the kernel's, for tests of
// package link and of the commands that read it. The trees are real
// directories with real relative symlinks, made at test time, and they loop
// as the kernel's do: a NIC's device link leads to a directory whose net/IF
// is the NIC again, every netdev's subsystem link leads back to class/net,
// a PCI device's driver link leads to a driver directory that links back to
// it, and a bridge's ports point back at the bridge through master,
// upper_BRIDGE and brport/bridge.
package linktest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tree is a sysfs tree under Root (the directory that stands for /sys).
type Tree struct {
	Root    string
	t       testing.TB
	dirs    map[string]string // interface name -> its directory, relative to Root
	ifindex map[string]int
	next    int
	phys    int
}

// New starts an empty sysfs tree at root (created if absent), with
// class/net and the loopback interface, which every network namespace has.
func New(t testing.TB, root string) *Tree {
	t.Helper()
	tr := &Tree{Root: root, t: t, dirs: map[string]string{}, ifindex: map[string]int{}, next: 1}
	tr.Dir("class/net")
	tr.Dir("bus/pci/drivers")
	tr.netdev("lo", "devices/virtual/net/lo", "", 772)
	return tr
}

// Dir makes a directory (and its parents) under Root.
func (tr *Tree) Dir(p string) {
	tr.t.Helper()
	if err := os.MkdirAll(filepath.Join(tr.Root, p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

// File writes an attribute file under Root, making its directory.
func (tr *Tree) File(p, content string) {
	tr.t.Helper()
	tr.Dir(filepath.Dir(p))
	if err := os.WriteFile(filepath.Join(tr.Root, p), []byte(content), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

// Link makes the symlink at (relative to Root) pointing at target (relative
// to Root), written as a relative link as the kernel writes them.
func (tr *Tree) Link(at, target string) {
	tr.t.Helper()
	tr.Dir(filepath.Dir(at))
	// kernfs writes the path up to the target's parent and then down by the
	// target's name, so a NIC's device link reads ../../../0000:00:1f.6,
	// never ../..
	rel, err := filepath.Rel(filepath.Dir(at), filepath.Dir(target))
	if err != nil {
		tr.t.Fatal(err)
	}
	rel = filepath.Join(rel, filepath.Base(target))
	if err := os.Symlink(rel, filepath.Join(tr.Root, at)); err != nil {
		tr.t.Fatal(err)
	}
}

// NetDir is the directory of an interface made earlier, relative to Root.
func (tr *Tree) NetDir(name string) string {
	tr.t.Helper()
	d, ok := tr.dirs[name]
	if !ok {
		tr.t.Fatalf("linktest: no interface %s in the tree", name)
	}
	return d
}

// Ifindex is the index the tree gave an interface.
func (tr *Tree) Ifindex(name string) int {
	tr.NetDir(name)
	return tr.ifindex[name]
}

// netdev makes an interface's directory with the attributes every netdev
// has, and its class/net link. arphrd is its link type (1 Ethernet, 772
// loopback, 65534 none).
func (tr *Tree) netdev(name, dir, devtype string, arphrd int) string {
	tr.t.Helper()
	idx := tr.next
	tr.next++
	tr.dirs[name] = dir
	tr.ifindex[name] = idx
	uevent := fmt.Sprintf("INTERFACE=%s\nIFINDEX=%d\n", name, idx)
	if devtype != "" {
		uevent = fmt.Sprintf("DEVTYPE=%s\n", devtype) + uevent
	}
	tr.File(dir+"/uevent", uevent)
	tr.File(dir+"/ifindex", fmt.Sprintf("%d\n", idx))
	tr.File(dir+"/iflink", fmt.Sprintf("%d\n", idx))
	tr.File(dir+"/type", fmt.Sprintf("%d\n", arphrd))
	tr.File(dir+"/address", fmt.Sprintf("02:00:00:00:00:%02x\n", idx&0xff))
	tr.File(dir+"/operstate", "up\n")
	tr.File(dir+"/statistics/tx_bytes", "0\n")
	tr.Link(dir+"/subsystem", "class/net")
	tr.Link("class/net/"+name, dir)
	return dir
}

// pci makes a PCI function with its bus and driver links (both loop back
// to it) and returns its directory.
func (tr *Tree) pci(slot, driver string) string {
	tr.t.Helper()
	if slot == "" {
		tr.phys++
		slot = fmt.Sprintf("0000:%02x:00.0", tr.phys)
	}
	dev := "devices/pci0000:00/" + slot
	tr.File(dev+"/vendor", "0x8086\n")
	tr.File(dev+"/uevent", fmt.Sprintf("DRIVER=%s\nPCI_SLOT_NAME=%s\n", driver, slot))
	tr.Link(dev+"/subsystem", "bus/pci")
	tr.Link("bus/pci/devices/"+slot, dev)
	drv := "bus/pci/drivers/" + driver
	tr.Dir(drv)
	tr.Link(drv+"/"+slot, dev)
	tr.Link(dev+"/driver", drv)
	return dev
}

// physical makes a netdev under a physical device: the device's net/IF is
// the netdev, and the netdev's device link leads back up to the device.
func (tr *Tree) physical(name, dev, devtype string) string {
	dir := tr.netdev(name, dev+"/net/"+name, devtype, 1)
	tr.Link(dir+"/device", dev)
	return dir
}

// WiredNIC makes a wired Ethernet NIC on PCI slot (e.g. "0000:00:1f.6"; ""
// picks one).
func (tr *Tree) WiredNIC(name, slot string) {
	tr.t.Helper()
	tr.physical(name, tr.pci(slot, "e1000e"), "")
}

// WiFiNIC makes a PCI Wi-Fi NIC as cfg80211 shows it: the device holds
// ieee80211/phyN (linked from class/ieee80211), and the netdev has
// phy80211 pointing at it, wireless/ and DEVTYPE=wlan.
func (tr *Tree) WiFiNIC(name, slot string) {
	tr.t.Helper()
	dev := tr.pci(slot, "iwlwifi")
	phy := fmt.Sprintf("phy%d", tr.phys)
	pdir := dev + "/ieee80211/" + phy
	tr.File(pdir+"/index", fmt.Sprintf("%d\n", tr.phys))
	tr.File(pdir+"/name", phy+"\n")
	tr.Link(pdir+"/device", dev)
	tr.Link(pdir+"/subsystem", "class/ieee80211")
	tr.Link("class/ieee80211/"+phy, pdir)
	dir := tr.physical(name, dev, "wlan")
	tr.Link(dir+"/phy80211", pdir)
	tr.Dir(dir + "/wireless")
}

// WiFiDeviceOnly makes a Wi-Fi NIC whose only sign in sysfs is its device's
// ieee80211/ directory (no phy80211, no wireless/, no DEVTYPE), as a driver
// outside cfg80211's netdev registration may show it.
func (tr *Tree) WiFiDeviceOnly(name, slot string) {
	tr.t.Helper()
	dev := tr.pci(slot, "vendorwifi")
	tr.File(dev+"/ieee80211/phy9/index", "9\n")
	tr.physical(name, dev, "")
}

// WWAN makes a mobile broadband modem's netdev (USB, DEVTYPE=wwan).
func (tr *Tree) WWAN(name string) {
	tr.t.Helper()
	dev := "devices/pci0000:00/0000:00:14.0/usb1/1-4/1-4:1.12"
	tr.File(dev+"/uevent", "DEVTYPE=usb_interface\nDRIVER=cdc_mbim\n")
	tr.physical(name, dev, "wwan")
}

// Virtual makes an interface with no device: a bridge, bond, VLAN, TUN or
// the like before its kind-specific parts are added.
func (tr *Tree) Virtual(name, devtype string) string {
	tr.t.Helper()
	return tr.netdev(name, "devices/virtual/net/"+name, devtype, 1)
}

// Stack links upper over lower as netdev_upper_dev_link does: lower_LOWER
// on the upper, upper_UPPER on the lower.
func (tr *Tree) Stack(upper, lower string) {
	tr.t.Helper()
	u, l := tr.NetDir(upper), tr.NetDir(lower)
	tr.Link(u+"/lower_"+lower, l)
	tr.Link(l+"/upper_"+upper, u)
}

// enslave links a port or slave to its master: the stacking links, and the
// port's master link pointing back at the master.
func (tr *Tree) enslave(master, port string) {
	tr.Stack(master, port)
	tr.Link(tr.NetDir(port)+"/master", tr.NetDir(master))
}

// Bridge makes a Linux bridge over ports: bridge/ on the master, brif/PORT
// pointing at each port's brport/, and brport/bridge, master and upper_BR on
// each port pointing back at the bridge.
func (tr *Tree) Bridge(name string, ports ...string) {
	tr.t.Helper()
	dir := tr.Virtual(name, "bridge")
	tr.File(dir+"/bridge/stp_state", "0\n")
	tr.File(dir+"/bridge/forward_delay", "1500\n")
	tr.Dir(dir + "/brif")
	for _, p := range ports {
		pd := tr.NetDir(p)
		tr.File(pd+"/brport/state", "3\n")
		tr.Link(pd+"/brport/bridge", dir)
		tr.Link(dir+"/brif/"+p, pd+"/brport")
		tr.enslave(name, p)
	}
}

// Bond makes a bonding master over slaves: bonding/slaves lists them, and
// each slave has bonding_slave/ and master pointing back.
func (tr *Tree) Bond(name string, slaves ...string) {
	tr.t.Helper()
	dir := tr.Virtual(name, "bond")
	tr.File(dir+"/bonding/mode", "active-backup 1\n")
	tr.File(dir+"/bonding/slaves", strings.Join(slaves, " ")+"\n")
	for _, s := range slaves {
		tr.File(tr.NetDir(s)+"/bonding_slave/state", "active\n")
		tr.enslave(name, s)
	}
}

// MasterOnly makes a master (a team, say, on a kernel without lower_
// links) whose members show only by their master link.
func (tr *Tree) MasterOnly(name string, members ...string) {
	tr.t.Helper()
	dir := tr.Virtual(name, "")
	for _, m := range members {
		tr.Link(tr.NetDir(m)+"/master", dir)
	}
}

// VLAN makes an 802.1Q VLAN over lower: lower_LOWER, and iflink naming the
// lower's ifindex.
func (tr *Tree) VLAN(name, lower string) {
	tr.t.Helper()
	dir := tr.Virtual(name, "vlan")
	tr.File(dir+"/iflink", fmt.Sprintf("%d\n", tr.Ifindex(lower)))
	tr.Stack(name, lower)
}

// Macvlan makes a macvlan over lower.
func (tr *Tree) Macvlan(name, lower string) {
	tr.t.Helper()
	dir := tr.Virtual(name, "")
	tr.File(dir+"/iflink", fmt.Sprintf("%d\n", tr.Ifindex(lower)))
	tr.Stack(name, lower)
}

// TUN makes a TUN device as Tailscale or a VPN opens it: tun_flags IFF_TUN
// | IFF_NO_PI (0x1001), link type none (65534), no device, no lower.
func (tr *Tree) TUN(name string) {
	tr.t.Helper()
	dir := tr.netdev(name, "devices/virtual/net/"+name, "", 65534)
	tr.File(dir+"/tun_flags", "0x1001\n")
	tr.File(dir+"/owner", "-1\n")
}

// WireGuard makes a kernel WireGuard interface: DEVTYPE=wireguard, link
// type none, no device, no lower.
func (tr *Tree) WireGuard(name string) {
	tr.t.Helper()
	tr.netdev(name, "devices/virtual/net/"+name, "wireguard", 65534)
}

// Veth makes one end of a veth pair whose peer (ifindex peer) is in another
// network namespace, so this sysfs does not show it.
func (tr *Tree) Veth(name string, peer int) {
	tr.t.Helper()
	dir := tr.Virtual(name, "")
	tr.File(dir+"/iflink", fmt.Sprintf("%d\n", peer))
}

// VethPair makes both ends of a veth pair in this namespace: each one's
// iflink is the other's ifindex.
func (tr *Tree) VethPair(a, b string) {
	tr.t.Helper()
	da, db := tr.Virtual(a, ""), tr.Virtual(b, "")
	tr.File(da+"/iflink", fmt.Sprintf("%d\n", tr.Ifindex(b)))
	tr.File(db+"/iflink", fmt.Sprintf("%d\n", tr.Ifindex(a)))
}

// VXLAN makes a VXLAN bound to a device (ip link add ... type vxlan dev
// LOWER): no lower_ link, only its iflink naming the device.
func (tr *Tree) VXLAN(name, lower string) {
	tr.t.Helper()
	dir := tr.Virtual(name, "")
	tr.File(dir+"/iflink", fmt.Sprintf("%d\n", tr.Ifindex(lower)))
}

// RouteTables copies a fixture directory's route and ipv6_route files (either
// may be absent) into hostRoot/proc/net, where link.Read looks for them.
func RouteTables(t testing.TB, fromDir, hostRoot string) {
	t.Helper()
	dst := filepath.Join(hostRoot, "proc/net")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"route", "ipv6_route"} {
		b, err := os.ReadFile(filepath.Join(fromDir, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
