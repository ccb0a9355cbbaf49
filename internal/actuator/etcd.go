package actuator

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// The local etcd member is called through its gRPC gateway: the same
// Cluster and Maintenance calls as etcd's Go client makes, as JSON over
// HTTP. The product binary links no gRPC (cmd/fleet-role/deps_test.go: etcd's
// client and gRPC would add megabytes to every probe too), and k3s serves
// the gateway beside gRPC: on https://127.0.0.1:2382 (pkg/etcd/etcd.go,
// listenClientHTTPURLs), its 2379 serving gRPC alone, with the same client
// certificate authentication.

// DefaultEtcdEndpoint is where k3s serves its member's HTTP API.
const DefaultEtcdEndpoint = "https://127.0.0.1:2382"

// k3s's etcd client certificate, server CA and key, on the host.
const (
	DefaultEtcdCA   = "/var/lib/rancher/k3s/server/tls/etcd/server-ca.crt"
	DefaultEtcdCert = "/var/lib/rancher/k3s/server/tls/etcd/client.crt"
	DefaultEtcdKey  = "/var/lib/rancher/k3s/server/tls/etcd/client.key"
)

// maxEtcdResponse bounds what is read of one answer: a member list of
// etcd's at most 7 members (settings' max_servers) with their URLs is a
// few kilobytes.
const maxEtcdResponse = 1 << 20

// Errors etcd answers that change what a command's outcome is.
var (
	// ErrNotLeader: MoveLeader on a member that does not lead.
	ErrNotLeader = errors.New("etcdserver: not leader")
	// ErrMemberNotFound: MemberRemove of a member that is gone.
	ErrMemberNotFound = errors.New("etcdserver: member not found")
)

// Etcd is the local member's gateway.
type Etcd struct {
	endpoint string
	tls      bool
	files    EtcdTLS
}

// EtcdTLS names the files of the client's TLS, paths as this process sees
// them; all empty for none.
type EtcdTLS struct {
	CA, Cert, Key string
}

// NewEtcd is the gateway of the member at endpoint (http or https). An
// https endpoint needs files: etcd's server CA, the client certificate and
// its key; an http one, none (etcd started without TLS, as the lab's are).
// The files are read at each call, not here: a standby's actuator, which
// k3s has given no member yet, starts and writes its drop-in without them,
// and a certificate k3s renews is taken at the next call.
func NewEtcd(endpoint string, files EtcdTLS) (*Etcd, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("--etcd-endpoint %q: want http(s)://HOST:PORT, the member's HTTP API (k3s: %s)", endpoint, DefaultEtcdEndpoint)
	}
	e := &Etcd{endpoint: strings.TrimSuffix(endpoint, "/"), tls: u.Scheme == "https", files: files}
	if e.tls && (files.CA == "" || files.Cert == "" || files.Key == "") {
		return nil, fmt.Errorf("--etcd-endpoint %s is https: it needs etcd's CA, a client certificate and its key (--etcd-ca %q, --etcd-cert %q, --etcd-key %q)", endpoint, files.CA, files.Cert, files.Key)
	}
	return e, nil
}

// client is an HTTP client for one call, with the TLS files as they are
// now.
func (e *Etcd) client() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the local member, never through a proxy
	tr.DisableKeepAlives = true
	if e.tls {
		cfg, err := clientTLS(e.files)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	return &http.Client{Transport: tr}, nil
}

func clientTLS(f EtcdTLS) (*tls.Config, error) {
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("etcd CA %s holds no PEM certificate", f.CA)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// id is a uint64 as the gateway writes it: a JSON string of decimal digits
// (proto3's JSON mapping), or a number.
type id uint64

func (i *id) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("etcd ID %s: %w", b, err)
	}
	*i = id(v)
	return nil
}

// View asks the member for its status and the member list.
func (e *Etcd) View(ctx context.Context) (EtcdView, error) {
	var st struct {
		Header struct {
			MemberID id `json:"member_id"`
		} `json:"header"`
		Leader id `json:"leader"`
	}
	if err := e.call(ctx, "/v3/maintenance/status", struct{}{}, &st); err != nil {
		return EtcdView{}, err
	}
	var ml struct {
		Members []struct {
			ID       id       `json:"ID"`
			Name     string   `json:"name"`
			PeerURLs []string `json:"peerURLs"`
			Learner  bool     `json:"isLearner"`
		} `json:"members"`
	}
	if err := e.call(ctx, "/v3/cluster/member/list", map[string]bool{"linearizable": true}, &ml); err != nil {
		return EtcdView{}, err
	}
	v := EtcdView{Self: uint64(st.Header.MemberID), Leader: uint64(st.Leader)}
	if v.Self == 0 {
		return EtcdView{}, errors.New("etcd status: no member ID in the answer")
	}
	for _, m := range ml.Members {
		v.Members = append(v.Members, Member{ID: uint64(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, Learner: m.Learner})
	}
	return v, nil
}

// Listening reports whether anything accepts a TCP connection on the
// member's port: false when the connection is refused (its etcd is
// closed, as a removed member's is within a second of its removal, or k3s
// is down), an error when it cannot tell (a timeout). The connection is
// closed at once; nothing is sent.
func (e *Etcd) Listening(ctx context.Context) (bool, error) {
	u, err := url.Parse(e.endpoint)
	if err != nil {
		return false, fmt.Errorf("etcd endpoint %q: %w", e.endpoint, err)
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	switch {
	case err == nil:
		c.Close()
		return true, nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return false, nil
	}
	return false, fmt.Errorf("dial the local etcd member at %s: %w", u.Host, err)
}

// MoveLeader asks the local member, which must lead, to hand its
// leadership to member to; etcd answers once the transfer is done (it
// waits up to an election timeout).
func (e *Etcd) MoveLeader(ctx context.Context, to uint64) error {
	return e.call(ctx, "/v3/maintenance/transfer-leadership", map[string]string{"targetID": strconv.FormatUint(to, 10)}, nil)
}

// RemoveMember removes member m.
func (e *Etcd) RemoveMember(ctx context.Context, m uint64) error {
	return e.call(ctx, "/v3/cluster/member/remove", map[string]string{"ID": strconv.FormatUint(m, 10)}, nil)
}

// call posts req as JSON to path and decodes the answer into resp (nil:
// ignored). An error answer becomes an error naming etcd's message, with
// ErrNotLeader and ErrMemberNotFound recognised.
func (e *Etcd) call(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	r.Header.Set("Content-Type", "application/json")
	hc, err := e.client()
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	res, err := hc.Do(r)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxEtcdResponse))
	if err != nil {
		return fmt.Errorf("etcd %s: read the answer: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		var ge struct {
			Message string `json:"message"`
			Error   string `json:"error"`
		}
		_ = json.Unmarshal(b, &ge)
		msg := ge.Message
		if msg == "" {
			msg = ge.Error
		}
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		err := fmt.Errorf("etcd %s: %s: %s", path, res.Status, msg)
		switch {
		case strings.Contains(msg, ErrNotLeader.Error()):
			err = fmt.Errorf("%w (%w)", ErrNotLeader, err)
		case strings.Contains(msg, ErrMemberNotFound.Error()):
			err = fmt.Errorf("%w (%w)", ErrMemberNotFound, err)
		}
		return err
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("etcd %s: decode the answer: %w", path, err)
	}
	return nil
}
