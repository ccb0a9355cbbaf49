package etcdmetrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// DefaultURL is where k3s's embedded etcd serves its metrics on every server
// (docs/facts.md, k3s).
const DefaultURL = "http://127.0.0.1:2381/metrics"

// DefaultTimeout bounds a scrape whose caller set no deadline: one k3s
// election timeout (5000 ms, docs/facts.md). A paused member accepts the
// connection and never answers, so no scrape may go unbounded. The bound
// covers the connection, the page's read and its parse.
const DefaultTimeout = 5 * time.Second

// MaxPageBytes bounds the page read (docs/limits.md, "Metrics servers and
// the etcd scrape"). The largest captured page (testdata/, etcd v3.6.15, a
// member of 3 with a learner) is 174,416 bytes, of which each peer's series
// take at most about 2.5 KB: a member of 7 (etcd's most, docs/facts.md) serves
// about 182 KB. 1 MiB is about six times that: room for the series etcd
// keeps for every member ever removed (it never deletes them, about 2.5 KB
// each) and for what a k3s server's process adds to the registry etcd
// serves; a page over it is not an etcd page. Reading and parsing the most
// it allows costs a few MiB and tens of milliseconds.
const MaxPageBytes = 1 << 20

// MaxKeptBytes bounds what of the page the text parser is given: the lines
// of the series the reading uses, removed members' series left out. They
// take 8,336 bytes of a member of 3's page and 10,567 with a learner
// (testdata/): about 2.2 KB a peer, so about 17 KB for a member of 7.
// 64 KiB is nearly four times that: room for families a later release adds
// to these series. The parser allocates about twenty bytes for each it
// reads, so this holds a parse to about 1.3 MiB, where the whole of
// MaxPageBytes would cost 21 MiB.
const MaxKeptBytes = 64 << 10

// MaxPeers is the most other members one member can have: etcd clusters
// have no more than 7 members (docs/facts.md, "etcd memory and size"). A page
// naming more known or connected peers is not one etcd wrote.
const MaxPeers = 7 - 1

// maxResponseHeaderBytes caps the response's headers: etcd sends a content
// type, a date and a length, under 200 bytes; 8 KiB is forty times that and
// the same cap fleet-role's own servers put on a request's headers.
const maxResponseHeaderBytes = 8 << 10

// transport is the scrape's own: no proxy (the member is on this node), no
// compression (the page cap then counts the bytes the member sent), no
// keep-alive (one scrape a sample period; a connection per scrape costs one
// loopback handshake and leaves nothing open between them), and a cap on
// the response's headers.
var transport = &http.Transport{
	DialContext:            (&net.Dialer{}).DialContext,
	DisableCompression:     true,
	DisableKeepAlives:      true,
	MaxResponseHeaderBytes: maxResponseHeaderBytes,
}

// ErrRedirect is returned for a metrics URL that answers with a redirect:
// etcd serves its page where it is asked for, and a scrape goes nowhere else.
var ErrRedirect = errors.New("redirect refused")

func refuseRedirect(req *http.Request, via []*http.Request) error {
	return fmt.Errorf("%w: %s answered with a redirect to %s", ErrRedirect, via[len(via)-1].URL, req.URL)
}

// Scrape reads and parses the metrics page at url. The scrape, its parse
// included, is bounded by ctx's deadline or client.Timeout, whichever ends
// first, and by DefaultTimeout when neither is set. client nil uses a client
// of the package's own; a client given keeps its transport (the package's
// when it has none) and never follows a redirect.
func Scrape(ctx context.Context, client *http.Client, url string) (*Snapshot, error) {
	var c http.Client
	if client != nil {
		c = *client
	}
	if c.Transport == nil {
		c.Transport = transport
	}
	c.CheckRedirect = refuseRedirect
	// The deadline goes on the context, so that it bounds the parse as
	// well as the request: client.Timeout alone ends with the read.
	var cancel context.CancelFunc = func() {}
	if c.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
	} else if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
	}
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	// Ask for the text format only: the parser reads nothing else.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %s", url, boundText(resp.Status))
	}
	if resp.ContentLength > MaxPageBytes {
		return nil, fmt.Errorf("scrape %s: page of %d bytes (Content-Length) larger than %d bytes (MaxPageBytes): not an etcd page", url, resp.ContentLength, MaxPageBytes)
	}
	// Read through the families' filter as it arrives: the page is never
	// held whole (readKept says why).
	kept, n, err := readKept(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w after %d bytes", context.Cause(ctx), n)
		}
		return nil, fmt.Errorf("scrape %s: read page: %w", url, err)
	}
	if n > MaxPageBytes {
		return nil, fmt.Errorf("scrape %s: page larger than %d bytes (MaxPageBytes): not an etcd page", url, MaxPageBytes)
	}
	now := wall.Now()
	s, err := parseKept(ctx, kept)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	s.Time = now
	return s, nil
}
