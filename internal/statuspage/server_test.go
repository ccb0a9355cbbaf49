package statuspage_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	for _, want := range []string{"controller test", "(2 remembered, ", `<span class="ok">FF</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, `http-equiv="refresh"`) {
		t.Errorf("the page refreshes with no refresh set")
	}
	// Served by a controller, the page loads itself again (without
	// script: the policy forbids any) every period, rounded up to whole
	// seconds.
	s.SetRefresh(1500 * time.Millisecond)
	if _, body := get(http.MethodGet); !strings.Contains(body, "<meta http-equiv=\"refresh\" content=\"2\">\n<title>") {
		t.Errorf("with a refresh of 1.5s the page's head holds no refresh of 2 s:\n%.400s", body)
	}
	s.SetRefresh(0)
	if resp, body := get(http.MethodHead); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD: %d with %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := get(http.MethodPost); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
	var nilServer *statuspage.Server
	nilServer.Observe(st) // observes nothing, and does not panic
	nilServer.SetStanding(nil)
	nilServer.Forget()

	// A replica that does not lead serves no decision of its own, and
	// says who leads; leading again, it serves its decisions.
	leading, note := false, "following: b holds the lease fleet-role/fleet-role"
	s.SetStanding(func() (bool, string) { return leading, note })
	if resp, body := get(http.MethodGet); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "does not lead") || !strings.Contains(body, note) {
		t.Errorf("not leading: %d %q, want 503 naming the holder", resp.StatusCode, body)
	}
	leading = true
	if resp, _ := get(http.MethodGet); resp.StatusCode != http.StatusOK {
		t.Errorf("leading again: %d, want the page", resp.StatusCode)
	}
	// Forgotten at the end of a term: the next term's first decision is
	// the first served.
	s.Forget()
	if resp, body := get(http.MethodGet); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "no decision yet") {
		t.Errorf("after Forget: %d %q, want 503 no decision yet", resp.StatusCode, body)
	}
	s.Observe(st)
	if resp, body := get(http.MethodGet); resp.StatusCode != http.StatusOK || !strings.Contains(body, "(3 remembered, ") {
		t.Errorf("the next term's first decision: %d, want the page with the history kept", resp.StatusCode)
	}
}
