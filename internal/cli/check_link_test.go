package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/link"
	"github.com/fleet-role/fleet-role/internal/link/linktest"
)

func mainLink(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(append([]string{"check", "link"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// linkHost lays out a host root: /proc/net from the link package's fixture
// tables, and a sysfs built at test time with a wired NIC, and a VLAN over a
// bond of a wired and a Wi-Fi slave.
func linkHost(t *testing.T, tables string) string {
	t.Helper()
	root := t.TempDir()
	tr := linktest.New(t, filepath.Join(root, "sys"))
	tr.WiredNIC("eth0", "0000:00:1f.6")
	tr.WiredNIC("eth1", "")
	tr.WiFiNIC("wlan2", "")
	tr.Bond("bond0", "eth1", "wlan2")
	tr.VLAN("bond0.10", "bond0")
	linktest.RouteTables(t, filepath.Join("../link/testdata/proc", tables), root)
	return root
}

func TestCheckLinkFixtureHosts(t *testing.T) {
	for _, c := range []struct {
		tables, iface string
		class         link.Class
		via           []string
		code          int
		verdict       string
	}{
		{"laptop", "eth0", link.Wired, []string{"eth0"}, ExitOK, "fit: the default route leaves by eth0, wired"},
		// A route by Wi-Fi is unfit, as the decision holds it.
		{"tie", "bond0.10", link.WiFi, []string{"bond0.10", "bond0", "eth1", "wlan2"}, ExitUnfit, "unfit: the default route leaves by bond0.10, a Wi-Fi interface"},
	} {
		t.Run(c.tables, func(t *testing.T) {
			root := linkHost(t, c.tables)
			code, out, errs := mainLink("--host-root", root, "--json")
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, errs)
			}
			var got struct {
				link.Reading
				Judged checkVerdict `json:"judged"`
			}
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("--json output %q: %v", out, err)
			}
			r := got.Reading
			if got.Judged.Verdict+": "+got.Judged.Why != c.verdict {
				t.Errorf("judged %+v, want %q", got.Judged, c.verdict)
			}
			if dec.More() {
				t.Errorf("--json printed more than one object: %q", out)
			}
			if r.Interface != c.iface || r.Class != c.class || !slices.Equal(r.Via, c.via) || r.Reason == "" {
				t.Errorf("%+v, want %s %s via %v", r, c.iface, c.class, c.via)
			}
			for _, field := range []string{`"interface"`, `"class"`, `"via"`, `"reason"`} {
				if !strings.Contains(out, field) {
					t.Errorf("--json lacks %s: %s", field, out)
				}
			}

			code, out, errs = mainLink("--host-root", root)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, errs)
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, want := range []string{"interface " + c.iface + " (ipv4 default route", "class " + string(c.class) + " ", "via " + strings.Join(c.via, " -> ") + " ", "reason ", "verdict " + c.verdict, "limit basis wifi is unfit"} {
				if !strings.Contains(flat, want) {
					t.Errorf("human output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestCheckLinkThisHost(t *testing.T) {
	code, out, errs := mainLink("--json")
	if code != ExitOK && code != ExitUnfit {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r link.Reading
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	want, err := link.Read("/")
	if err != nil {
		t.Fatal(err)
	}
	if r.Interface != want.Interface || r.Class != want.Class {
		t.Errorf("check link says %s %s, link.Read says %s %s", r.Interface, r.Class, want.Interface, want.Class)
	}
	if (r.Class == link.WiFi) != (code == ExitUnfit) {
		t.Errorf("class %s with exit %d: want 3 exactly for Wi-Fi", r.Class, code)
	}
}

func TestCheckLinkFailures(t *testing.T) {
	noRoute := linkHost(t, "nodefault")
	empty := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no default route", []string{"--host-root", noRoute}, ExitFail, "no default route"},
		{"no proc", []string{"--host-root", empty}, ExitFail, "read " + filepath.Join(empty, "proc/net/route")},
		{"empty host root", []string{"--host-root", ""}, ExitUsage, "--host-root is empty"},
		{"argument", []string{"eth0"}, ExitUsage, `unknown command "eth0"`},
		{"unknown flag", []string{"--iface", "eth0"}, ExitUsage, "unknown flag: --iface"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := mainLink(c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errs, c.code, c.want)
			}
			if out != "" {
				t.Errorf("printed a reading on failure: %q", out)
			}
		})
	}
	// The no-route error names both tables it looked in.
	_, _, errs := mainLink("--host-root", noRoute)
	for _, f := range []string{"proc/net/route", "proc/net/ipv6_route"} {
		if !strings.Contains(errs, filepath.Join(noRoute, f)) {
			t.Errorf("stderr %q does not name %s", errs, f)
		}
	}
}
