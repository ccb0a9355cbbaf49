package statuspage_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// The page is served read-only, with the policy that lets it load nothing,
// once there is a decision; its history grows with each one.
func TestServer(t *testing.T) {
	s := statuspage.NewServer(4, "controller test")
	srv := httptest.NewServer(s)
	defer srv.Close()
	get := func(method string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+statuspage.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	if resp, body := get(http.MethodGet); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "no decision yet") {
		t.Fatalf("before a decision: %d %q, want 503 no decision yet", resp.StatusCode, body)
	}
	st := fleet(t, 2, false)
	s.Observe(st)
	s.Observe(st)
	resp, body := get(http.MethodGet)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != statuspage.ContentSecurityPolicy ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET: %d %v", resp.StatusCode, resp.Header)
	}
	for _, want := range []string{"controller test", "(2 remembered)", `<span class="ok">FF</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if resp, body := get(http.MethodHead); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD: %d with %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := get(http.MethodPost); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
	var nilServer *statuspage.Server
	nilServer.Observe(st) // observes nothing, and does not panic
}
