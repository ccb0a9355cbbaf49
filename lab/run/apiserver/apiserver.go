// Package apiserver runs a real kube-apiserver process on a real etcd, with
// RBAC, a token file holding an admin in system:masters, and service-account
// keys, so that fleet-role's tests and the mesh scenario act against the real
// API server and its real authorisation: every request a ServiceAccount makes
// is checked exactly as it would be in a cluster. There is no kubelet: pods
// never run, and the components run as processes holding their accounts'
// tokens (TokenFor).
package apiserver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Config says how to run the API server.
type Config struct {
	// Binary is the kube-apiserver executable (testenv.KubeAPIServer in tests).
	Binary string
	// EtcdServers are the client URLs of the etcd members it stores in.
	EtcdServers []string
	// EtcdPrefix keeps several API servers on one etcd apart; "/registry"
	// when empty, as in a cluster.
	EtcdPrefix string
	// Dir holds the keys, certificates, token file and the process's log. It
	// is created when missing and kept across Restart.
	Dir string
	// BindAddress is the address it serves and advertises; 127.0.0.1 when
	// empty. An address inside a network namespace works with Command.
	BindAddress string
	// Port is the secure port; a free one on 127.0.0.1 is chosen when 0. It
	// stays the same across Restart, so kubeconfigs written earlier stay valid.
	Port int
	// Command builds the process from the binary and its arguments; nil runs
	// it directly. The mesh scenario wraps it in `ip netns exec NS`, which
	// execs, so the process it starts is the API server itself.
	Command func(name string, args ...string) *exec.Cmd
	// ExtraArgs are appended to the flags Start sets.
	ExtraArgs []string
}

// Server is a running kube-apiserver.
type Server struct {
	// URL is the secure endpoint, https://ADDRESS:PORT.
	URL string
	// AdminToken authenticates as user "admin" in group system:masters.
	AdminToken string
	// CACert is the PEM certificate the server presents; clients trust it.
	CACert []byte
	// LogPath is where the process's output goes (appended on Restart).
	LogPath string

	cfg  Config
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start runs kube-apiserver and waits until /readyz answers ok or ctx ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Binary == "" {
		return nil, errors.New("start kube-apiserver: no binary given")
	}
	if len(cfg.EtcdServers) == 0 {
		return nil, errors.New("start kube-apiserver: no etcd servers given")
	}
	if cfg.Dir == "" {
		return nil, errors.New("start kube-apiserver: no directory given")
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1"
	}
	if cfg.EtcdPrefix == "" {
		cfg.EtcdPrefix = "/registry"
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	if cfg.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, fmt.Errorf("start kube-apiserver: %w", err)
		}
		cfg.Port = p
	}
	s := &Server{
		URL:     "https://" + net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port)),
		LogPath: filepath.Join(cfg.Dir, "kube-apiserver.log"),
		cfg:     cfg,
	}
	if err := s.writeFiles(); err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	s.args = []string{
		"--etcd-servers=" + strings.Join(cfg.EtcdServers, ","),
		"--etcd-prefix=" + cfg.EtcdPrefix,
		"--bind-address=" + cfg.BindAddress,
		"--advertise-address=" + cfg.BindAddress,
		"--secure-port=" + strconv.Itoa(cfg.Port),
		// Without it the apiserver refuses a loopback advertise address: it
		// would publish it as the kubernetes Service's endpoint.
		"--endpoint-reconciler-type=none",
		"--authorization-mode=RBAC",
		// As k3s runs its API server (its default, --allow-privileged):
		// acting's actuator is a privileged DaemonSet (deploy/acting), and
		// a server that refused it would refuse that install.
		"--allow-privileged=true",
		"--token-auth-file=" + filepath.Join(cfg.Dir, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(cfg.Dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(cfg.Dir, "sa.key"),
		"--tls-cert-file=" + filepath.Join(cfg.Dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(cfg.Dir, "serving.key"),
		"--cert-dir=" + filepath.Join(cfg.Dir, "certs"),
		"--service-cluster-ip-range=10.43.0.0/16", // k3s's default; no traffic goes there
		"--profiling=false",
		// A graceful stop (SIGTERM) otherwise waits for every open watch to
		// end on its own, which an informer's does after 5 to 10 minutes:
		// Stop would wait its 15 s and kill. With a grace period the server
		// ends the watches itself, as a test that stops it for a short
		// outage needs.
		"--shutdown-watch-termination-grace-period=2s",
	}
	s.args = append(s.args, cfg.ExtraArgs...)
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// writeFiles makes the serving certificate, the service-account key and the
// token file once; a Restart reuses them so tokens issued earlier stay valid.
func (s *Server) writeFiles() error {
	dir := s.cfg.Dir
	// kube-apiserver v1.34 writes its loopback certificate into --cert-dir
	// without making the folder.
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		return err
	}
	tokenPath := filepath.Join(dir, "tokens.csv")
	if b, err := os.ReadFile(tokenPath); err == nil {
		s.AdminToken, _, _ = strings.Cut(string(b), ",")
	} else {
		tok := make([]byte, 24)
		if _, err := rand.Read(tok); err != nil {
			return err
		}
		s.AdminToken = hex.EncodeToString(tok)
		line := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", s.AdminToken)
		if err := os.WriteFile(tokenPath, []byte(line), 0o600); err != nil {
			return err
		}
	}
	saPath := filepath.Join(dir, "sa.key")
	if _, err := os.Stat(saPath); err != nil {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return fmt.Errorf("generate service-account key: %w", err)
		}
		pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		if err := os.WriteFile(saPath, pemKey, 0o600); err != nil {
			return err
		}
	}
	crtPath, keyPath := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	if b, err := os.ReadFile(crtPath); err == nil {
		s.CACert = b
		return nil
	}
	crt, key, err := selfSigned(s.cfg.BindAddress)
	if err != nil {
		return fmt.Errorf("generate serving certificate: %w", err)
	}
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(crtPath, crt, 0o600); err != nil {
		return err
	}
	s.CACert = crt
	return nil
}

// selfSigned makes a certificate that is its own CA, valid for the bind
// address, loopback and localhost: clients verify the server against it.
func selfSigned(bind string) (crtPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "fleet-role test kube-apiserver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           ips,
		DNSNames:              []string{"localhost", "kubernetes", "kubernetes.default.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

func (s *Server) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	var cmd *exec.Cmd
	if s.cfg.Command != nil {
		cmd = s.cfg.Command(s.cfg.Binary, s.args...)
	} else {
		cmd = exec.Command(s.cfg.Binary, s.args...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := s.waitReady(ctx, done); err != nil {
		s.Stop()
		return fmt.Errorf("start kube-apiserver: %w\n%s", err, s.logTail(40))
	}
	return nil
}

// waitReady polls /readyz until it answers ok, the process exits, or ctx ends.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	hc, err := s.httpClient()
	if err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.AdminToken)
		resp, err := hc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("/readyz %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return errors.New("the process exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready (%s): %w", last, ctx.Err())
		case <-tick.C:
		}
	}
}

func (s *Server) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CACert) {
		return nil, errors.New("no certificate in the serving certificate file")
	}
	return &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}, nil
}

// logTail returns the last n lines of the process's log, for errors.
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop ends the process (SIGTERM, then SIGKILL after 15 s) and returns once
// it has exited, so that its port can be reused. Safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart stops the process, waits for it to exit, and starts it again on
// the same address, port, keys and tokens; it returns once /readyz is ok.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	return s.start(ctx)
}

// Running reports whether the process has been started and not yet exited.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// AdminConfig is a client configuration acting as the admin (system:masters).
func (s *Server) AdminConfig() *rest.Config {
	return s.TokenConfig(s.AdminToken)
}

// TokenConfig is a client configuration authenticating with token.
func (s *Server) TokenConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), s.CACert...)},
		Timeout:         30 * time.Second,
	}
}

// Kubeconfig writes a kubeconfig file for this server authenticating with
// token (the admin's when token is empty), for kubectl and for processes
// started with --kubeconfig.
func (s *Server) Kubeconfig(path, token string) error {
	if token == "" {
		token = s.AdminToken
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["fleet-role-test"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.CACert}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["fleet-role-test"] = &clientcmdapi.Context{Cluster: "fleet-role-test", AuthInfo: "user"}
	kc.CurrentContext = "fleet-role-test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// TokenFor issues a token for ServiceAccount namespace/sa through the
// TokenRequest API, as the kubelet does for a pod. The API refuses a ttl
// under 10 minutes.
func (s *Server) TokenFor(ctx context.Context, namespace, sa string, ttl time.Duration) (string, error) {
	cs, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, sa, err)
	}
	secs := int64(ttl / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, sa, err)
	}
	return tr.Status.Token, nil
}

// TokenForPod issues a token of ServiceAccount sa bound to the Pod pod (by
// name and UID), as the kubelet does for a pod it runs: the token then
// carries the Pod's node in the user's extra
// (authentication.kubernetes.io/node-name), and dies with the Pod.
func (s *Server) TokenForPod(ctx context.Context, namespace, sa, pod string, uid types.UID, ttl time.Duration) (string, error) {
	return s.boundToken(ctx, namespace, sa, "Pod", pod, uid, ttl)
}

// TokenForNode issues a token of ServiceAccount sa bound to the Node node
// (by name and UID) rather than to a Pod: anyone who may create tokens for
// sa can mint one. It carries the node's claims
// (authentication.kubernetes.io/node-name, node-uid) and no Pod's.
func (s *Server) TokenForNode(ctx context.Context, namespace, sa, node string, uid types.UID, ttl time.Duration) (string, error) {
	return s.boundToken(ctx, namespace, sa, "Node", node, uid, ttl)
}

// boundToken issues a token of ServiceAccount sa bound to the object of kind
// (a core/v1 Pod or Node) by name and UID, through the TokenRequest API.
func (s *Server) boundToken(ctx context.Context, namespace, sa, kind, name string, uid types.UID, ttl time.Duration) (string, error) {
	cs, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		return "", fmt.Errorf("token for %s/%s bound to %s %s: %w", namespace, sa, strings.ToLower(kind), name, err)
	}
	secs := int64(ttl / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &secs,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: kind, APIVersion: "v1", Name: name, UID: uid},
		}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s bound to %s %s: %w", namespace, sa, strings.ToLower(kind), name, err)
	}
	return tr.Status.Token, nil
}

// FreePort asks the kernel for a free TCP port on loopback.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
