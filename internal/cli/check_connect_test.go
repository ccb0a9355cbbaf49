package cli

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/connect"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// mainConnect runs fleet-role check connect through Main.
func mainConnect(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(append([]string{"check", "connect"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckConnect(t *testing.T) {
	var up []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		up = append(up, l.Addr().String())
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()

	args := []string{"--peer", up[0], "--peer", refused, "--peer", up[1], "--timeout", "3s"}
	code, out, errs := mainConnect(append(args, "--json")...)
	// The failed connect is part of the reading, and counts as over the
	// limit, as the decision counts it: unfit, exit 3.
	if code != ExitUnfit {
		t.Fatalf("exit %d, want 3 (a failed connect is part of the reading, and unfit); stderr %s", code, errs)
	}
	var r struct {
		Peers []struct {
			Peer    string   `json:"peer"`
			OK      bool     `json:"ok"`
			Seconds *float64 `json:"connect_seconds"`
			Error   *string  `json:"error"`
		} `json:"peers"`
		TimeoutSeconds float64      `json:"timeout_seconds"`
		Judged         checkVerdict `json:"judged"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if r.TimeoutSeconds != 3 || len(r.Peers) != 3 {
		t.Fatalf("reading %s, want 3 peers and timeout_seconds 3", out)
	}
	for i, want := range []string{up[0], refused, up[1]} {
		p := r.Peers[i]
		if p.Peer != want {
			t.Errorf("peer %d is %s, want %s", i, p.Peer, want)
		}
		if want == refused {
			if p.OK || p.Seconds != nil || p.Error == nil || !strings.Contains(*p.Error, "connection refused") {
				t.Errorf("closed port: %s, want ok false with an error and no connect_seconds", out)
			}
		} else if !p.OK || p.Seconds == nil || *p.Seconds <= 0 || p.Error != nil {
			t.Errorf("listener %s: want ok with connect_seconds and no error: %s", want, out)
		}
	}

	if r.Judged.Verdict != checkUnfit || !strings.Contains(r.Judged.Why, "the connect to "+refused+" failed") || r.Judged.Limit.Value != 0.25 {
		t.Errorf("judged %+v, want unfit by the failed connect, against 250ms (election_timeout 5s / 20)", r.Judged)
	}

	// Without the refused peer: the slowest connect against the limit, at
	// the cluster's election timeout (a flag, as for the controller).
	code, out, _ = mainConnect("--peer", up[0], "--peer", up[1], "--json", "--election-timeout", "10s")
	r.Judged = checkVerdict{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != ExitOK || r.Judged.Verdict != checkFit || r.Judged.Limit.Value != 0.5 ||
		!strings.Contains(r.Judged.Why, "must be at most 500ms (the slowest of 2)") {
		t.Errorf("two listeners at election_timeout 10s: exit %d, judged %+v (%v); want 0, fit against 500ms", code, r.Judged, err)
	}

	code, out, _ = mainConnect(args...)
	if code != ExitUnfit || !strings.Contains(out, "PEER") || !strings.Contains(out, refused+"  failed: ") || !strings.Contains(out, up[0]+"  ") || !strings.Contains(out, " ms\n") {
		t.Errorf("human output (exit %d):\n%s", code, out)
	}
}

func TestCheckConnectUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "at least one --peer"},
		{[]string{"--peer", "127.0.0.1:1", "--peer", "nohost"}, `"nohost"`},
		{[]string{"--peer", "127.0.0.1:65536"}, `"127.0.0.1:65536"`},
		// The timeout at zero and under is refused; just over is taken.
		{[]string{"--peer", "127.0.0.1:1", "--timeout", "0"}, "--timeout 0s"},
		{[]string{"--peer", "127.0.0.1:1", "--timeout", "-1ns"}, "--timeout -1ns"},
		{[]string{"--peer", "127.0.0.1:1", "--timeout", "soon"}, "soon"},
		{[]string{"--peer", "127.0.0.1:1", "extra"}, "extra"},
		{[]string{"--peers", "127.0.0.1:1"}, "unknown flag"},
	} {
		code, _, errs := mainConnect(tc.args...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("check connect %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	code, out, errs := mainConnect("--peer", "127.0.0.1:1", "--timeout", "1ns", "--json")
	if code != ExitUnfit || !strings.Contains(out, `"ok": false`) || !strings.Contains(out, "no connection within 1ns") {
		t.Errorf("--timeout 1ns: exit %d, out %s, stderr %s; want 3 and a timed-out peer", code, out, errs)
	}
}

// The slowest connect is held to the decision's limit, at most a
// twentieth of the election timeout: fit at it, unfit a microsecond over;
// a failed connect is unfit whatever the others.
func TestConnectVerdictAtTheLimit(t *testing.T) {
	l := settings.Defaults().ConnectLimit() // 5 s / 20 = 250 ms
	for _, c := range []struct {
		peers []connect.Result
		want  string
	}{
		{[]connect.Result{{Peer: "a:2380", OK: true, Seconds: 0.249999}}, checkFit},
		{[]connect.Result{{Peer: "a:2380", OK: true, Seconds: 0.001}, {Peer: "b:2380", OK: true, Seconds: 0.25}}, checkFit},
		{[]connect.Result{{Peer: "a:2380", OK: true, Seconds: 0.250001}}, checkUnfit},
		{[]connect.Result{{Peer: "a:2380", OK: true, Seconds: 0.001}, {Peer: "b:2380", Err: "refused"}}, checkUnfit},
		{nil, checkNotJudged},
	} {
		if v := connectVerdict(l, c.peers); v.Verdict != c.want {
			t.Errorf("%+v against %v: %+v, want %s", c.peers, l.Value, v, c.want)
		}
	}
}
