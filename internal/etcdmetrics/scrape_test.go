package etcdmetrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestScrapeErrors(t *testing.T) {
	leader, err := os.ReadFile(filepath.Join("testdata", "leader.prom"))
	if err != nil {
		t.Fatal(err)
	}
	// A page padded with comment lines to exactly n bytes.
	padded := func(n int) []byte {
		b := append([]byte(nil), leader...)
		for len(b) < n {
			line := "# padding\n"
			if rest := n - len(b); rest < len(line) {
				line = "#" + strings.Repeat(" ", rest-2) + "\n"
				if rest == 1 {
					line = "\n"
				}
			}
			b = append(b, line...)
		}
		return b
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { w.Write(leader) })
	mux.HandleFunc("/notetcd", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "go_goroutines 7") })
	mux.HandleFunc("/under", func(w http.ResponseWriter, _ *http.Request) { w.Write(padded(MaxPageBytes - 1)) })
	mux.HandleFunc("/max", func(w http.ResponseWriter, _ *http.Request) { w.Write(padded(MaxPageBytes)) })
	mux.HandleFunc("/over", func(w http.ResponseWriter, _ *http.Request) { w.Write(padded(MaxPageBytes + 1)) })
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	ctx := ctxFor(t, 30*time.Second)

	s, err := Scrape(ctx, srv.Client(), srv.URL+"/metrics")
	if err != nil || s.MemberID != idLeader || s.Time.IsZero() {
		t.Errorf("scrape of the leader page: %v, %+v", err, s)
	}
	if _, err := Scrape(ctx, nil, srv.URL+"/absent"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	if _, err := Scrape(ctx, nil, srv.URL+"/notetcd"); !errors.Is(err, ErrNoData) {
		t.Errorf("a page without etcd metrics: %v, want ErrNoData", err)
	}
	if s, err := Scrape(ctx, nil, srv.URL+"/max"); err != nil || s.MemberID != idLeader {
		t.Errorf("a page of exactly MaxPageBytes: %v", err)
	}
	if _, err := Scrape(ctx, nil, srv.URL+"/over"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a page of MaxPageBytes+1: %v, want refused", err)
	}
	if s, err := Scrape(ctx, nil, srv.URL+"/under"); err != nil || s.MemberID != idLeader {
		t.Errorf("a page of MaxPageBytes-1: %v", err)
	}
	for _, n := range []int{MaxPageBytes - 1, MaxPageBytes, MaxPageBytes + 1} {
		if got := len(padded(n)); got != n {
			t.Fatalf("padding made %d bytes, want %d", got, n)
		}
	}
	// A closed port: refused at once, naming the URL.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/metrics"
	l.Close()
	if _, err := Scrape(ctx, nil, url); err == nil || !strings.Contains(err.Error(), url) {
		t.Errorf("closed port: %v, want an error naming %s", err, url)
	}
}
