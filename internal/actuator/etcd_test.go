package actuator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clientCert is a self-signed client certificate and its key, PEM.
func clientCert(t *testing.T) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), cert
}

// The gateway over TLS with a client certificate, as k3s serves it on
// 2382 (ClientCertAuth), against a stand-in that answers as etcd's gateway
// does: proto names, uint64s as strings, errors as {code, message}. The
// real gateway's answers are read in test/integration/actuator.
func TestEtcdGatewayOverTLS(t *testing.T) {
	certPEM, keyPEM, cert := clientCert(t)
	var moved string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/v3/maintenance/status":
			io.WriteString(w, `{"header":{"cluster_id":"1","member_id":"10276657743932975437","revision":"5","raft_term":"2"},"version":"3.6.15","leader":"10276657743932975437","raftIndex":"9"}`)
		case "/v3/cluster/member/list":
			io.WriteString(w, `{"header":{"member_id":"10276657743932975437"},"members":[{"ID":"10276657743932975437","name":"x","peerURLs":["https://10.0.0.1:2380"]},{"ID":"3052426015330291729","peerURLs":["`+newcomer+`"],"isLearner":true}]}`)
		case "/v3/maintenance/transfer-leadership":
			var req map[string]string
			_ = json.Unmarshal(b, &req)
			moved = req["targetID"]
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"code":9,"message":"etcdserver: not leader","details":[]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()

	dir := t.TempDir()
	files := EtcdTLS{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "client.crt"), Key: filepath.Join(dir, "client.key")}
	serverCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for p, b := range map[string][]byte{files.CA: serverCA, files.Cert: certPEM, files.Key: keyPEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e, err := NewEtcd(srv.URL, files)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, err := e.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Self != 10276657743932975437 || v.Leader != v.Self || len(v.Members) != 2 || !v.Members[1].Learner || v.Members[1].PeerURLs[0] != newcomer {
		t.Fatalf("view %+v", v)
	}
	if err := e.MoveLeader(ctx, 42); !errors.Is(err, ErrNotLeader) || moved != "42" {
		t.Fatalf("move: %v, target sent %q", err, moved)
	}

	// A key that cannot be read fails the call before it is made.
	bare, err := NewEtcd(srv.URL, EtcdTLS{CA: files.CA, Cert: files.Cert, Key: filepath.Join(dir, "absent.key")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.View(ctx); err == nil || !strings.Contains(err.Error(), "client certificate") {
		t.Fatalf("no key: %v", err)
	}
}

func TestEtcdEndpointChecked(t *testing.T) {
	for _, c := range []struct {
		endpoint string
		files    EtcdTLS
		says     string
	}{
		{"127.0.0.1:2382", EtcdTLS{}, "want http(s)://HOST:PORT"},
		{"unix:///run/etcd.sock", EtcdTLS{}, "want http(s)://HOST:PORT"},
		{"https://127.0.0.1:2382/v3", EtcdTLS{CA: "a", Cert: "b", Key: "c"}, "want http(s)://HOST:PORT"},
		{"https://127.0.0.1:2382", EtcdTLS{CA: "a"}, "needs etcd's CA, a client certificate and its key"},
	} {
		if _, err := NewEtcd(c.endpoint, c.files); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %q", c.endpoint, err, c.says)
		}
	}
	if _, err := NewEtcd("http://127.0.0.1:2379", EtcdTLS{}); err != nil {
		t.Errorf("http without TLS files: %v", err)
	}
}

// Listening tells a port something listens on from one nothing does, on
// real sockets, and sends nothing.
func TestListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		n, _ := c.Read(make([]byte, 1))
		c.Close()
		got <- n
	}()
	e, err := NewEtcd("https://"+l.Addr().String(), EtcdTLS{CA: "ca", Cert: "c", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if up, err := e.Listening(ctx); !up || err != nil {
		t.Fatalf("a listening port: %v, %v", up, err)
	}
	if n := <-got; n != 0 {
		t.Errorf("%d bytes sent to the member", n)
	}
	l.Close()
	if up, err := e.Listening(ctx); up || err != nil {
		t.Fatalf("a closed port: %v, %v; want false, no error", up, err)
	}
}
