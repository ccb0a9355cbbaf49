package etcdmetrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultURL is where k3s's embedded etcd serves its metrics on every server
// (FACTS.md, k3s).
const DefaultURL = "http://127.0.0.1:2381/metrics"

// DefaultTimeout bounds a scrape whose caller set no deadline: one k3s
// election timeout (5000 ms, FACTS.md). A paused member accepts the
// connection and never answers, so no scrape may go unbounded.
const DefaultTimeout = 5 * time.Second

// MaxPageBytes bounds the page read. A member's page is about 150 KiB (the
// pages under testdata/); anything near this is not an etcd page.
const MaxPageBytes = 16 << 20

// Scrape reads and parses the metrics page at url. The scrape is bounded by
// ctx's deadline or client.Timeout, and by DefaultTimeout when neither is
// set. client nil uses http.DefaultClient.
func Scrape(ctx context.Context, client *http.Client, url string) (*Snapshot, error) {
	if client == nil {
		client = http.DefaultClient
	}
	if _, ok := ctx.Deadline(); !ok && client.Timeout == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	// Ask for the text format only: the parser reads nothing else.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: read page: %w", url, err)
	}
	if len(body) > MaxPageBytes {
		return nil, fmt.Errorf("scrape %s: page larger than %d bytes", url, MaxPageBytes)
	}
	now := time.Now()
	s, err := Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	s.Time = now
	return s, nil
}
