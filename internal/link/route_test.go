package link

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/link/linktest"
)

func parseFile(t *testing.T, p string, parse func(f *os.File) ([]Route, error)) []Route {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	routes, err := parse(f)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return routes
}

func v4(f *os.File) ([]Route, error) { return ParseRoutes(f) }
func v6(f *os.File) ([]Route, error) { return ParseIPv6Routes(f) }

func TestParseRoutesLaptop(t *testing.T) {
	routes := parseFile(t, "testdata/proc/laptop/route", v4)
	if len(routes) != 5 {
		t.Fatalf("%d routes, want 5: %+v", len(routes), routes)
	}
	want := Route{
		Interface:   "eth0",
		Destination: netip.MustParsePrefix("0.0.0.0/0"),
		Gateway:     netip.MustParseAddr("192.168.1.1"),
		Metric:      100,
		Flags:       0x0003,
	}
	if routes[0] != want {
		t.Errorf("first route %+v, want %+v", routes[0], want)
	}
	if got := routes[2].Destination; got != netip.MustParsePrefix("172.17.0.0/16") {
		t.Errorf("docker0 destination %s", got)
	}
	if got := routes[4]; got.Interface != "wlan0" || got.Metric != 600 || got.Destination != netip.MustParsePrefix("192.168.1.0/24") {
		t.Errorf("last route %+v", got)
	}
	def, err := DefaultRoute(routes)
	if err != nil {
		t.Fatal(err)
	}
	if def.Interface != "eth0" || def.Metric != 100 {
		t.Errorf("default %+v, want eth0 metric 100 (wlan0 has 600)", def)
	}
}

// Metrics at, just under and just over each other: the lower wins, the
// first listed on a tie.
func TestDefaultRouteMetricBoundary(t *testing.T) {
	mk := func(dev string, metric uint32) Route {
		return Route{Interface: dev, Destination: netip.MustParsePrefix("0.0.0.0/0"), Flags: flagUp | 0x2, Metric: metric}
	}
	for _, c := range []struct {
		wlan uint32
		want string
	}{{99, "wlan0"}, {100, "eth0"}, {101, "eth0"}} {
		def, err := DefaultRoute([]Route{mk("eth0", 100), mk("wlan0", c.wlan)})
		if err != nil || def.Interface != c.want {
			t.Errorf("eth0 100, wlan0 %d: got %+v %v, want %s", c.wlan, def, err, c.want)
		}
	}
	tie := parseFile(t, "testdata/proc/tie/route", v4)
	if def, err := DefaultRoute(tie); err != nil || def.Interface != "bond0.10" {
		t.Errorf("tie: %+v %v, want the first listed, bond0.10", def, err)
	}
}

func TestDefaultRouteUnreachable(t *testing.T) {
	routes := parseFile(t, "testdata/proc/unreachable/route", v4)
	if routes[0].Interface != "*" || routes[0].Flags != 0x0201 {
		t.Fatalf("unreachable entry parsed as %+v", routes[0])
	}
	_, err := DefaultRoute(routes)
	if !errors.Is(err, ErrNoDefaultRoute) || !strings.Contains(err.Error(), "metric (0) discards packets") {
		t.Fatalf("err %v, want ErrNoDefaultRoute naming the discarding route", err)
	}
}

func TestParseIPv6Routes(t *testing.T) {
	routes := parseFile(t, "testdata/proc/ipv6only/ipv6_route", v6)
	if len(routes) != 9 {
		t.Fatalf("%d routes, want 9", len(routes))
	}
	want := Route{
		Interface:   "eth0",
		Destination: netip.MustParsePrefix("::/0"),
		Source:      netip.MustParsePrefix("::/0"),
		Gateway:     netip.MustParseAddr("fe80::1"),
		Metric:      1024,
		Flags:       0x00450003,
	}
	if routes[3] != want {
		t.Errorf("route 4: %+v, want %+v", routes[3], want)
	}
	null := routes[8]
	if null.Interface != "lo" || null.Metric != 0xffffffff || null.IsDefault() {
		t.Errorf("null entry %+v: is not a usable default", null)
	}
	def, err := DefaultRoute(routes)
	if err != nil {
		t.Fatal(err)
	}
	if def.Interface != "wlan0" || def.Metric != 600 {
		t.Errorf("default %+v, want wlan0 metric 600", def)
	}

	routes = parseFile(t, "testdata/proc/srcspecific/ipv6_route", v6)
	if _, err := DefaultRoute(routes); !errors.Is(err, ErrNoDefaultRoute) {
		t.Errorf("source-specific default taken as the default: %v", err)
	}
}

func TestParseMalformed(t *testing.T) {
	good4 := "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0"
	for _, c := range []struct{ name, in, want string }{
		{"short", "eth0\t00000000\t010200C0\t0003", "line 1: 4 fields, want 11"},
		{"bad dest", strings.Replace(good4, "00000000", "0000000G", 1), "line 1: destination"},
		{"7 digit gw", strings.Replace(good4, "010200C0", "10200C0", 1), "line 1: gateway"},
		{"decimal metric", strings.Replace(good4, "\t0\t00000000", "\tx\t00000000", 1), "line 1: metric"},
		{"holey mask", strings.Replace(good4, "\t0\t00000000", "\t0\t00FF00FF", 1), "not contiguous"},
		{"second line", good4 + "\nwlan0 1", "line 2:"},
		{"long line", strings.Repeat("x", maxLineBytes+1), "token too long"},
	} {
		t.Run("v4 "+c.name, func(t *testing.T) {
			_, err := ParseRoutes(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	good6 := "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0"
	for _, c := range []struct{ name, in, want string }{
		{"short", "00000000000000000000000000000000 00", "line 1: 2 fields, want 10"},
		{"prefix over 128", strings.Replace(good6, " 00 ", " 81 ", 1), "line 1: destination"},
		{"bad next hop", strings.Replace(good6, "fd00", "fz00", 1), "line 1: next hop"},
		{"bad metric", strings.Replace(good6, "00000400", "0000040", 1), "line 1: metric"},
		{"bad flags", strings.Replace(good6, "00000003", "0000000x", 1), "line 1: flags"},
	} {
		t.Run("v6 "+c.name, func(t *testing.T) {
			_, err := ParseIPv6Routes(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

// Read over fixture host roots: /proc from testdata, /sys built at test time.
func TestReadFixtureHosts(t *testing.T) {
	for _, c := range []struct {
		host, iface, family string
		class               Class
	}{
		{"laptop", "eth0", IPv4, Wired},
		{"tie", "bond0.10", IPv4, WiFi},
		{"ipv6only", "wlan0", IPv6, WiFi},
	} {
		t.Run(c.host, func(t *testing.T) {
			root := t.TempDir()
			copyProc(t, c.host, root)
			zooAt(t, filepath.Join(root, "sys"))
			r, err := Read(root)
			if err != nil {
				t.Fatal(err)
			}
			if r.Interface != c.iface || r.Family != c.family || r.Class != c.class {
				t.Errorf("%+v, want %s %s %s", r, c.iface, c.family, c.class)
			}
		})
	}
	for _, host := range []string{"nodefault", "unreachable", "srcspecific"} {
		t.Run(host, func(t *testing.T) {
			root := t.TempDir()
			copyProc(t, host, root)
			_, err := Read(root)
			if !errors.Is(err, ErrNoDefaultRoute) || !strings.Contains(err.Error(), filepath.Join(root, "proc/net/route")) {
				t.Fatalf("err %v, want ErrNoDefaultRoute naming the file", err)
			}
		})
	}
	t.Run("no proc", func(t *testing.T) {
		root := t.TempDir()
		_, err := Read(root)
		if err == nil || errors.Is(err, ErrNoDefaultRoute) || !strings.Contains(err.Error(), "read "+filepath.Join(root, "proc/net/route")) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("no sys", func(t *testing.T) {
		root := t.TempDir()
		copyProc(t, "laptop", root)
		_, err := Read(root)
		if err == nil || !strings.Contains(err.Error(), "classify eth0 under "+filepath.Join(root, "sys")) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("no ipv6", func(t *testing.T) {
		// A host booted with ipv6.disable=1 has no ipv6_route: no route, no error.
		root := t.TempDir()
		copyProc(t, "laptop", root)
		if err := os.Remove(filepath.Join(root, "proc/net/ipv6_route")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		zooAt(t, filepath.Join(root, "sys"))
		if r, err := Read(root); err != nil || r.Interface != "eth0" {
			t.Fatalf("%+v %v", r, err)
		}
	})
}

func copyProc(t *testing.T, host, root string) {
	t.Helper()
	linktest.RouteTables(t, filepath.Join("testdata/proc", host), root)
}
