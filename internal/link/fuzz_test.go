package link

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// routeSeeds are the fixture tables, this host's included, as the fuzzers'
// seed corpora.
func routeSeeds(f *testing.F, name string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata/proc/*", name))
	if err != nil || len(files) == 0 {
		f.Fatalf("no %s fixtures: %v", name, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(""))
	f.Add([]byte("Iface\n"))
}

// checkRoutes holds what must be true of any table a parser accepts.
func checkRoutes(t *testing.T, routes []Route, family int) {
	for _, r := range routes {
		if r.Interface == "" || strings.ContainsAny(r.Interface, " \t\n") {
			t.Fatalf("interface %q", r.Interface)
		}
		if !r.Destination.IsValid() || r.Destination.Addr().BitLen() != family || r.Destination != r.Destination.Masked() {
			t.Fatalf("destination %v for a %d-bit table", r.Destination, family)
		}
	}
	def, err := DefaultRoute(routes)
	if err == nil && (!def.IsDefault() || def.Discards()) {
		t.Fatalf("picked %+v, which is not a usable default", def)
	}
	if err == nil {
		for _, r := range routes {
			if r.IsDefault() && r.Metric < def.Metric {
				t.Fatalf("picked metric %d over %+v", def.Metric, r)
			}
		}
	}
}

func FuzzParseRoutes(f *testing.F) {
	routeSeeds(f, "route")
	f.Fuzz(func(t *testing.T, b []byte) {
		routes, err := ParseRoutes(bytes.NewReader(b))
		if err != nil {
			return
		}
		checkRoutes(t, routes, 32)
	})
}

func FuzzParseIPv6Routes(f *testing.F) {
	routeSeeds(f, "ipv6_route")
	f.Fuzz(func(t *testing.T, b []byte) {
		routes, err := ParseIPv6Routes(bytes.NewReader(b))
		if err != nil {
			return
		}
		checkRoutes(t, routes, 128)
	})
}

// fuzzIfaces is how many interfaces a generated tree names; the walk starts
// at the first.
const fuzzIfaces = 6

// buildFuzzTree lays out a sysfs-like tree under root from b: interfaces
// under virtual or PCI devices (or missing), and then links of every kind
// the walk reads (lower_*, brif/, master, device, class/net, bonding/slaves)
// pointing at interfaces, devices, ancestors or themselves, so that loops of
// every shape appear. Every link target stays inside root. Errors are
// ignored: the tree is whatever the bytes manage to make.
func buildFuzzTree(root string, b []byte) {
	i := 0
	next := func() int {
		if i >= len(b) {
			return 0
		}
		i++
		return int(b[i-1])
	}
	iface := func(k int) string { return fmt.Sprintf("i%d", k%fuzzIfaces) }
	dirs := make([]string, fuzzIfaces)
	for k := range dirs {
		dirs[k] = "devices/virtual/net/" + iface(k)
	}
	targets := func(k int) []string {
		return []string{
			"class/net", "class/net/" + iface(k), dirs[k%fuzzIfaces], dirs[k%fuzzIfaces] + "/brport",
			fmt.Sprintf("devices/pci/d%d", k%fuzzIfaces), "devices", ".",
		}
	}
	link := func(at, target string) {
		full := filepath.Join(root, at)
		os.MkdirAll(filepath.Dir(full), 0o755)
		rel, err := filepath.Rel(filepath.Dir(at), target)
		if err != nil {
			return
		}
		os.Symlink(rel, full)
	}
	write := func(at, content string) {
		full := filepath.Join(root, at)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(content), 0o644)
	}
	os.MkdirAll(filepath.Join(root, "class/net"), 0o755)
	for k := range dirs {
		c := next()
		if c&1 != 0 {
			dirs[k] = fmt.Sprintf("devices/pci/d%d/net/%s", k, iface(k))
		}
		if c&2 != 0 {
			continue // named by others, but not there
		}
		os.MkdirAll(filepath.Join(root, dirs[k]), 0o755)
		if c&4 != 0 {
			link("class/net/"+iface(k), targets(next())[next()%7])
		} else {
			link("class/net/"+iface(k), dirs[k])
		}
	}
	for i < len(b) {
		op, a, c := next()%9, next()%fuzzIfaces, next()
		d := dirs[a]
		pick := targets(c)[next()%7]
		switch op {
		case 0:
			link(d+"/lower_"+iface(c), dirs[c%fuzzIfaces])
		case 1:
			link(d+"/lower_"+iface(c), pick)
		case 2:
			link(d+"/master", pick)
		case 3:
			link(d+"/brif/"+iface(c), dirs[c%fuzzIfaces]+"/brport")
			link(dirs[c%fuzzIfaces]+"/brport/bridge", d)
		case 4:
			link(d+"/device", pick)
		case 5:
			link(d+"/"+[]string{"phy80211", "wireless", "subsystem", "upper_" + iface(c)}[c%4], pick)
		case 6:
			write(d+"/bonding/slaves", fmt.Sprintf("%s %s ../x %c", iface(c), iface(c+1), rune(c)))
		case 7:
			write(d+"/"+[]string{"uevent", "iflink", "tun_flags", "type"}[c%4], fmt.Sprintf("DEVTYPE=%s\n%d\n", []string{"wlan", "wwan", "bridge", "wireguard"}[c%4], c))
		case 8:
			link(d+"/"+iface(c), d) // a directory linking to itself
			link(d+"/lower_"+iface(a), d)
		}
	}
}

// The walk ends, without panicking, on any tree of symlinks, and what it
// says is well formed: it starts at the interface asked about, walks no
// interface twice and no more interfaces than the tree names.
func FuzzClassify(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 4, 1, 0},    // a chain of lowers back to i0
		{1, 1, 1, 1, 1, 1, 4, 0, 0, 0, 3, 0, 1, 0, 2, 1, 0, 0},       // bridge port pointing back
		{5, 4, 1, 4, 2, 4, 1, 0, 8, 0, 0, 0, 8, 1, 1, 0, 6, 0, 1, 0}, // class/net elsewhere, self links, slaves
		bytes.Repeat([]byte{7}, 64),
		bytes.Repeat([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8}, 12),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		root := t.TempDir()
		buildFuzzTree(root, b)
		res, err := Classify(os.DirFS(root), "i0")
		if err != nil {
			t.Fatalf("class/net exists, yet: %v", err)
		}
		switch res.Class {
		case Wired, WiFi, Unknown:
		default:
			t.Fatalf("class %q", res.Class)
		}
		if len(res.Via) == 0 || res.Via[0] != "i0" || res.Reason == "" {
			t.Fatalf("%+v", res)
		}
		seen := map[string]bool{}
		for _, v := range res.Via {
			if seen[v] {
				t.Fatalf("walked %s twice: %v", v, res.Via)
			}
			seen[v] = true
		}
		if len(res.Via) > maxNestDev*fuzzIfaces {
			t.Fatalf("walked %d interfaces", len(res.Via))
		}
	})
}
