package connect

import (
	"encoding/json"
	"net"
	"strconv"
	"testing"
)

// FuzzParsePeer: any text is refused or gives a host and a port from 1 to
// 65535 that join back into a peer reading the same.
func FuzzParsePeer(f *testing.F) {
	for _, s := range []string{"10.0.0.1:2380", "[fd00::1]:2380", "host:etcd", ":2380", "h:0", "h:65536", "h:-1", "[::1", "a:b:c", "h:02380", "h: 80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, peer string) {
		host, port, err := ParsePeer(peer)
		if err != nil {
			return
		}
		if host == "" || port == 0 {
			t.Fatalf("ParsePeer(%q) = %q, %d", peer, host, port)
		}
		h2, p2, err := ParsePeer(net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil || h2 != host || p2 != port {
			t.Fatalf("ParsePeer(%q) = %q %d; joined again: %q %d %v", peer, host, port, h2, p2, err)
		}
	})
}

// FuzzResultJSON: any text is refused or reads into a result whose JSON
// reads back the same.
func FuzzResultJSON(f *testing.F) {
	for _, s := range []string{`{"peer":"a:1","ok":true,"connect_seconds":0.001}`, `{"peer":"a:1","ok":false,"error":"refused"}`, `{}`, `null`, `[]`, `{"connect_seconds":1e999}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			return
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%+v does not encode: %v", r, err)
		}
		var back Result
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%s does not decode: %v", out, err)
		}
		again, err := json.Marshal(back)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not stable: %s then %s (%v)", out, again, err)
		}
	})
}
