package link

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
)

// Class is what kind of link an interface's traffic leaves the host by.
type Class string

// The classes, from best to worst for a voter: a Wi-Fi member makes the
// whole link Wi-Fi, and a link that cannot be seen is not vouched for.
const (
	Wired   Class = "wired"
	Unknown Class = "unknown"
	WiFi    Class = "wifi"
)

// rank orders the classes by how much they count against a link: when an
// interface spreads traffic over several members, the worst decides.
func (c Class) rank() int {
	switch c {
	case Wired:
		return 0
	case WiFi:
		return 2
	default:
		return 1
	}
}

// maxNestDev is the kernel's own limit on stacked network devices
// (MAX_NEST_DEV in include/linux/netdevice.h, 8 since Linux 5.5: linking an
// upper is refused with EMLINK when the stack would exceed 8 devices), so a
// walk that goes deeper is in a tree that is not the kernel's.
const maxNestDev = 8

// maxAttrBytes bounds a sysfs attribute read: the kernel serves each one
// from a single page (PAGE_SIZE, 4096 bytes on x86-64 and most arm64).
const maxAttrBytes = 4096

// classNet is where sysfs lists a network namespace's interfaces.
const classNet = "class/net"

// Result is the classification of one interface's link.
type Result struct {
	Class  Class
	Via    []string // the interfaces walked, in the order they were walked
	Reason string   // why, naming the interface that decided or stopped the walk
}

// Classify walks sysfs (fsys is rooted where /sys is mounted) from iface down
// through the devices it sits on, and says whether its traffic leaves by a
// wired link, Wi-Fi, or a link that cannot be seen.
//
// An interface is Wi-Fi when it has wireless/ or phy80211, its device has
// ieee80211/, or its uevent says DEVTYPE=wlan. It is wired when it has a
// device link (a physical device) and none of those. A virtual interface is
// followed to its members: lower_* links (VLAN, macvlan, bond, team, bridge,
// VRF), brif/ entries (bridge ports), bonding/slaves, and, where none of those
// exists, the interfaces whose master link names it, or else the interface
// its iflink names (the device a VXLAN or bound tunnel sends through; a veth
// end's iflink names its peer instead, which names it back, and is not
// followed: the peer receives what it sends). The master link itself
// is never followed: it points up the stack, and from a bridge port it leads
// back to the bridge and on to the other ports, none of which carry this
// interface's traffic. Members are named by interface and looked up under
// class/net, so the kernel's directory loops (device/net/IF/device/...,
// subsystem, brif/IF/bridge) are never entered; the walk still keeps a
// visited set and stops at the kernel's stacking depth, so no tree can make
// it loop.
//
// Among a bond's (or any stack's) members the worst decides: a bond of a
// wired and a Wi-Fi slave is Wi-Fi. A bridge is different: its ports that
// reach no physical device (veth, tap) lead to local guests, not off the
// host, so they are left out when some port does reach one.
//
// The error is for a sysfs that cannot be read at all; an interface that
// cannot be followed is a Result of class unknown whose reason says where
// and why the walk stopped.
func Classify(fsys fs.FS, iface string) (Result, error) {
	if _, err := fs.Stat(fsys, classNet); err != nil {
		return Result{}, fmt.Errorf("read %s: %w", classNet, err)
	}
	w := &walker{fsys: fsys, visited: map[string]bool{}}
	v := w.visit(iface, 0)
	return Result{Class: v.class, Via: w.via, Reason: v.reason}, nil
}

type walker struct {
	fsys    fs.FS
	visited map[string]bool
	via     []string
	// members by master, from every interface's master link; read once per
	// walk, and only when an interface shows its members no other way.
	byMaster map[string][]string
	byIndex  map[string]string // ifindex -> interface, read once per walk when needed
}

type verdict struct {
	class  Class
	reason string
}

func unknownf(format string, a ...any) verdict {
	return verdict{class: Unknown, reason: fmt.Sprintf(format, a...)}
}

// visit classifies one interface; the caller has checked it is not visited.
func (w *walker) visit(name string, depth int) verdict {
	w.visited[name] = true
	w.via = append(w.via, name)
	if !validName(name) {
		return unknownf("%q is not an interface name", name)
	}
	dir := path.Join(classNet, name)
	if _, err := fs.Stat(w.fsys, dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return unknownf("%s is not in %s (a sysfs of another network namespace?)", name, classNet)
		}
		return unknownf("%s stopped the walk: %v", name, err)
	}

	devtype, err := w.ueventValue(dir, "DEVTYPE")
	if err != nil {
		return unknownf("%s stopped the walk: %v", name, err)
	}
	if why, err := w.wireless(dir, devtype); err != nil {
		return unknownf("%s stopped the walk: %v", name, err)
	} else if why != "" {
		return verdict{class: WiFi, reason: fmt.Sprintf("%s is Wi-Fi (%s)", name, why)}
	}
	if v, ok := w.device(name, dir, devtype); ok {
		return v
	}

	members, kind, err := w.members(name, dir)
	if err != nil {
		return unknownf("%s stopped the walk: %v", name, err)
	}
	if len(members) == 0 {
		return w.leaf(name, dir, kind, devtype)
	}
	var fresh []string
	for _, m := range members {
		if !w.visited[m] {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) == 0 {
		return unknownf("%s stopped the walk: its members (%s) were already walked, a loop", name, strings.Join(members, ", "))
	}
	// name is the (depth+1)th device of the stack; its members would make
	// it depth+2 devices high.
	if depth+2 > maxNestDev {
		return unknownf("%s stopped the walk: its members would make a stack of %d devices, more than the kernel allows (MAX_NEST_DEV %d)", name, depth+2, maxNestDev)
	}
	vs := make([]verdict, len(fresh))
	for i, m := range fresh {
		if w.visited[m] {
			// Reached through an earlier member: already counted there.
			vs[i] = verdict{class: "", reason: ""}
			continue
		}
		vs[i] = w.visit(m, depth+1)
	}
	return combine(name, kind, fresh, vs)
}

// wireless says why dir is a Wi-Fi interface, or "" when it is not.
func (w *walker) wireless(dir, devtype string) (string, error) {
	for _, p := range []struct{ entry, why string }{
		{"phy80211", "phy80211"},
		{"wireless", "wireless/"},
		{"device/ieee80211", "its device has ieee80211/"},
	} {
		ok, err := w.exists(path.Join(dir, p.entry))
		if err != nil {
			return "", err
		}
		if ok {
			return p.why, nil
		}
	}
	if devtype == "wlan" {
		return "uevent DEVTYPE=wlan", nil
	}
	return "", nil
}

// device classifies an interface with a device link, a physical device.
func (w *walker) device(name, dir, devtype string) (verdict, bool) {
	link := path.Join(dir, "device")
	if _, err := lstat(w.fsys, link); err != nil {
		return verdict{}, false
	}
	dev := "a physical device"
	if target, err := fs.ReadLink(w.fsys, link); err == nil {
		if b := path.Base(target); b != "." && b != ".." && b != "/" {
			dev = "physical device " + b
		}
	}
	if _, err := fs.Stat(w.fsys, link); err != nil {
		return unknownf("%s stopped the walk: its device link does not resolve: %v", name, err), true
	}
	if devtype == "wwan" {
		return unknownf("%s is a mobile broadband modem (uevent DEVTYPE=wwan, %s): neither wired nor Wi-Fi", name, dev), true
	}
	return verdict{class: Wired, reason: fmt.Sprintf("%s reaches %s (device link) with no wireless/, phy80211 or ieee80211/", name, dev)}, true
}

// Kinds of interface with members, for the reason.
const (
	kindBridge = "bridge"
	kindBond   = "bond"
	kindOther  = ""
)

// members lists the interfaces name sits on, in a stable order, without
// duplicates, and what kind of master it is.
func (w *walker) members(name, dir string) ([]string, string, error) {
	kind := kindOther
	if ok, err := w.exists(path.Join(dir, "bridge")); err != nil {
		return nil, "", err
	} else if ok {
		kind = kindBridge
	} else if ok, err := w.exists(path.Join(dir, "bonding")); err != nil {
		return nil, "", err
	} else if ok {
		kind = kindBond
	}

	var out []string
	add := func(n string) {
		if validName(n) && n != name && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	entries, err := fs.ReadDir(w.fsys, dir)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if n, ok := strings.CutPrefix(e.Name(), "lower_"); ok {
			add(n)
		}
	}
	ports, err := fs.ReadDir(w.fsys, path.Join(dir, "brif"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("read %s/brif: %w", dir, err)
	}
	for _, e := range ports {
		add(e.Name())
	}
	slaves, err := w.attr(path.Join(dir, "bonding/slaves"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	for _, s := range strings.Fields(slaves) {
		add(s)
	}
	if len(out) == 0 {
		if err := w.loadMasters(); err != nil {
			return nil, "", err
		}
		for _, n := range w.byMaster[name] {
			add(n)
		}
	}
	if len(out) == 0 {
		// A VXLAN or a tunnel bound to a device shows it only as its
		// iflink, the device its packets leave through.
		if l := w.iflink(dir); l.differs && l.beneath != "" {
			add(l.beneath)
		}
	}
	return out, kind, nil
}

// iflinkInfo is what an interface's iflink says: the ifindex of the device
// it sends through (a VLAN's, macvlan's or bound tunnel's lower), or of its
// peer (a veth's other end), or its own ifindex when neither.
type iflinkInfo struct {
	ifindex, iflink string
	differs         bool
	beneath         string // the interface iflink names, when it is a device beneath
	peer            string // the interface iflink names, when it names this one back: a veth pair
}

func (w *walker) iflink(dir string) iflinkInfo {
	ifindex, err1 := w.attr(path.Join(dir, "ifindex"))
	iflink, err2 := w.attr(path.Join(dir, "iflink"))
	l := iflinkInfo{ifindex: strings.TrimSpace(ifindex), iflink: strings.TrimSpace(iflink)}
	if err1 != nil || err2 != nil || l.ifindex == l.iflink || l.iflink == "0" {
		return l
	}
	l.differs = true
	if err := w.loadIndexes(); err != nil {
		return l
	}
	other, ok := w.byIndex[l.iflink]
	if !ok {
		return l
	}
	back, err := w.attr(path.Join(classNet, other, "iflink"))
	if err == nil && strings.TrimSpace(back) == l.ifindex {
		l.peer = other
	} else {
		l.beneath = other
	}
	return l
}

// loadIndexes reads every interface's ifindex, once per walk.
func (w *walker) loadIndexes() error {
	if w.byIndex != nil {
		return nil
	}
	w.byIndex = map[string]string{}
	entries, err := fs.ReadDir(w.fsys, classNet)
	if err != nil {
		return fmt.Errorf("read %s: %w", classNet, err)
	}
	for _, e := range entries {
		idx, err := w.attr(path.Join(classNet, e.Name(), "ifindex"))
		if err != nil {
			continue
		}
		w.byIndex[strings.TrimSpace(idx)] = e.Name()
	}
	return nil
}

// loadMasters reads every interface's master link, once per walk, for
// kernels and device kinds that show membership only that way.
func (w *walker) loadMasters() error {
	if w.byMaster != nil {
		return nil
	}
	w.byMaster = map[string][]string{}
	entries, err := fs.ReadDir(w.fsys, classNet)
	if err != nil {
		return fmt.Errorf("read %s: %w", classNet, err)
	}
	for _, e := range entries {
		target, err := fs.ReadLink(w.fsys, path.Join(classNet, e.Name(), "master"))
		if err != nil {
			continue // no master, or not a link: not a member of anything
		}
		m := path.Base(target)
		w.byMaster[m] = append(w.byMaster[m], e.Name())
	}
	return nil
}

// leaf explains an interface with no device and no members: the walk stops
// there, and the reason says what kind of interface stopped it.
func (w *walker) leaf(name, dir, kind, devtype string) verdict {
	const cannotSee = "so the physical link its traffic leaves by cannot be seen"
	if kind == kindBridge {
		return unknownf("%s stopped the walk: a bridge with no ports, %s", name, cannotSee)
	}
	if kind == kindBond {
		return unknownf("%s stopped the walk: a bond with no slaves, %s", name, cannotSee)
	}
	if devtype == "wireguard" {
		return unknownf("%s stopped the walk: a WireGuard tunnel (uevent DEVTYPE=wireguard) with no device or lower link; its packets leave by whichever interface routes to its peers, which sysfs does not show", name)
	}
	if flags, err := w.attr(path.Join(dir, "tun_flags")); err == nil {
		return unknownf("%s stopped the walk: a TUN/TAP device (tun_flags %s) with no device or lower link; the program behind it (Tailscale, a VPN) sends its packets on by whichever interface routes to its peers, which sysfs does not show", name, strings.TrimSpace(flags))
	}
	if typ, err := w.attr(path.Join(dir, "type")); err == nil && strings.TrimSpace(typ) == "772" {
		return unknownf("%s stopped the walk: the loopback interface (type 772), which leaves no host", name)
	}
	if l := w.iflink(dir); l.differs {
		if l.peer != "" {
			return unknownf("%s stopped the walk: one end of a veth pair whose other end, %s (its iflink %s), is in this namespace; %s receives what %s sends rather than carrying it off the host, so no physical link lies beneath %s", name, l.peer, l.iflink, l.peer, name, name)
		}
		return unknownf("%s stopped the walk: no device or lower_* link, and its iflink (%s) is not its own ifindex (%s) but names no interface in this sysfs: the other end of a veth pair, usually in another network namespace", name, l.iflink, l.ifindex)
	}
	return unknownf("%s stopped the walk: no device link (not a physical device), no lower_*, brif/, bonding/slaves or iflink naming another interface, and no interface naming it as master: a virtual interface (a veth end whose peer is elsewhere, an unbound tunnel) beneath which no physical link can be seen", name)
}

// combine decides a master's class from its members': the worst member
// decides, except that a bridge's ports that reach no physical device are
// left out when some port does.
func combine(name, kind string, members []string, vs []verdict) verdict {
	var idx []int
	for i, v := range vs {
		if v.class != "" {
			idx = append(idx, i)
		}
	}
	var left []string
	if kind == kindBridge {
		var physical []int
		for _, i := range idx {
			if vs[i].class != Unknown {
				physical = append(physical, i)
			} else {
				left = append(left, members[i])
			}
		}
		if len(physical) > 0 {
			idx = physical
		} else {
			left = nil
		}
	}
	worst := idx[0]
	for _, i := range idx[1:] {
		if vs[i].class.rank() > vs[worst].class.rank() {
			worst = i
		}
	}

	var b strings.Builder
	switch {
	case len(members) == 1 && kind == kindOther:
		fmt.Fprintf(&b, "%s sits on %s", name, members[0])
	default:
		what := "is over"
		switch kind {
		case kindBridge:
			what = "is a bridge over"
		case kindBond:
			what = "is a bond over"
		}
		list := make([]string, len(members))
		for i, m := range members {
			if vs[i].class == "" {
				list[i] = m + " (walked before)"
			} else {
				list[i] = fmt.Sprintf("%s (%s)", m, vs[i].class)
			}
		}
		fmt.Fprintf(&b, "%s %s %s", name, what, strings.Join(list, ", "))
		if len(idx) > 1 {
			b.WriteString(", the worst decides")
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(&b, "; ports that reach no physical device (%s) lead to local guests, not off the host, and are left out", strings.Join(left, ", "))
	}
	fmt.Fprintf(&b, "; %s", vs[worst].reason)
	return verdict{class: vs[worst].class, reason: b.String()}
}

// exists reports whether p exists, following links, telling "not there"
// apart from a failure to look. A link that loops or dangles is not there.
func (w *walker) exists(p string) (bool, error) {
	_, err := fs.Stat(w.fsys, p)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) || isLinkTrouble(err) {
		return false, nil
	}
	return false, fmt.Errorf("stat %s: %w", p, err)
}

// isLinkTrouble recognises the errors a symbolic link that loops (ELOOP) or
// runs through a non-directory (ENOTDIR) gives: sysfs has neither, a fixture
// or a fuzzed tree may, and both mean "not there" for the walk.
func isLinkTrouble(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR)
}

// attr reads a sysfs attribute, at most one page of it.
func (w *walker) attr(p string) (string, error) {
	f, err := w.fsys.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAttrBytes))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return string(b), nil
}

// ueventValue returns KEY's value from dir/uevent, or "" when absent.
func (w *walker) ueventValue(dir, key string) (string, error) {
	s, err := w.attr(path.Join(dir, "uevent"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isLinkTrouble(err) {
			return "", nil
		}
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			return v, nil
		}
	}
	return "", nil
}

// lstat uses the file system's Lstat when it has one, so that a dangling
// device link still counts as a device link.
func lstat(fsys fs.FS, p string) (fs.FileInfo, error) {
	if l, ok := fsys.(fs.ReadLinkFS); ok {
		return l.Lstat(p)
	}
	return fs.Stat(fsys, p)
}

// validName is a kernel interface name: 1 to IFNAMSIZ-1 (15) bytes, no
// slash, no white space, not "." or ".." (dev_valid_name in net/core/dev.c).
func validName(n string) bool {
	if n == "" || len(n) > 15 || n == "." || n == ".." {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c == '/' || c == ':' || c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
