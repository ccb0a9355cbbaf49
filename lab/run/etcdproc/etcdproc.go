// Package etcdproc starts and stops real etcd member processes from the
// server binary, one process per member, for the tests, the demo, the mesh
// scenario and the benchmarks.
//
// One process per member is the point: members embedded in one process share
// one metrics registry (docs/facts.md, "etcd metrics as they really appear"), so
// per-member metrics pages exist only when every member is its own process.
// Each member serves its metrics on a listener of its own
// (--listen-metrics-urls), as k3s serves them on 127.0.0.1:2381.
package etcdproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Standard etcd ports, used when a member's listen address does not exist in
// this process's network namespace (a member run inside a namespace of its
// own, where nothing else listens).
const (
	StandardClientPort  = 2379
	StandardPeerPort    = 2380
	StandardMetricsPort = 2381 // k3s serves metrics here (docs/facts.md, k3s)
)

// Config says what cluster to start.
type Config struct {
	// Binary is the etcd server binary (testenv.Etcd(t) in tests).
	Binary string
	// Dir holds one data directory per member. Required.
	Dir string
	// Members is the number of voting members to start (default 3).
	Members int
	// HeartbeatInterval and ElectionTimeout are passed to every member;
	// zero leaves etcd's own defaults (100 ms and 1000 ms, docs/facts.md).
	HeartbeatInterval, ElectionTimeout time.Duration
	// QuotaBackendBytes is passed as --quota-backend-bytes when non-zero.
	QuotaBackendBytes int64
	// Name names member i (0-based); nil names them etcd-1, etcd-2, ...
	Name func(i int) string
	// Host is member i's listen IP; nil means 127.0.0.1. When the address is
	// not present in this network namespace the member gets the standard
	// ports 2379, 2380 and 2381.
	Host func(i int) string
	// AdvertisePeerURL is the peer URL member i advertises, given the URL it
	// listens on; nil advertises the listen URL. It lets a caller put a proxy
	// in the peer path.
	AdvertisePeerURL func(i int, listen string) string
	// Command builds member i's process from its name and arguments; nil
	// runs the binary directly. It lets a caller run a member inside a
	// network namespace (ip netns exec NS etcd ...). The process it returns
	// must be etcd itself (ip netns exec execs it in place), so that
	// signals reach the member.
	Command func(i int, name string, args []string) *exec.Cmd
	// Stdout receives every member's log, each line prefixed with the
	// member's name; nil discards it (the tail is still kept for errors).
	Stdout io.Writer
	// StartTimeout bounds the wait for a member to become healthy (default
	// 30 s: a cold start on a loaded 2-core machine takes a few seconds).
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL
	// (default 2 s; a leader whose peers are gone waits about 10 s for a
	// leadership transfer that cannot happen, docs/testing.md).
	StopGrace time.Duration
}

const (
	defaultMembers      = 3
	defaultStartTimeout = 30 * time.Second
	defaultStopGrace    = 2 * time.Second
	pollInterval        = 50 * time.Millisecond
	statusTimeout       = 2 * time.Second
	logTailLines        = 30
)

// Cluster is a set of running member processes.
type Cluster struct {
	// Members holds every member started, learners included, in the order
	// they were started. Removed members stay in it, stopped.
	Members []*Member

	cfg     Config
	mu      sync.Mutex
	next    int // index of the next member to create
	client  *clientv3.Client
	stopped bool
	putSeq  int
}

// Member is one etcd process.
type Member struct {
	Name string
	// ID is the member's ID as etcd's labels print it: unpadded lowercase
	// hex. It is known once the member has answered a status request.
	ID               string
	ClientURL        string
	PeerURL          string // the URL it listens on for peers
	AdvertisePeerURL string // the URL it tells its peers
	MetricsURL       string // the full /metrics URL
	DataDir          string

	index   int
	args    []string // arguments of the first start
	cluster *Cluster
	tail    *tailWriter

	mu   sync.Mutex
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed when the current process has exited
	err  error         // the exit status of the last process
}

// Start starts cfg.Members member processes as a new cluster and waits until
// every one is healthy and the cluster has a leader. On failure it stops
// whatever it started and says which member failed, with its log tail.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Binary == "" {
		return nil, errors.New("etcdproc: no etcd binary given")
	}
	if cfg.Dir == "" {
		return nil, errors.New("etcdproc: no directory given")
	}
	if cfg.Members == 0 {
		cfg.Members = defaultMembers
	}
	if cfg.Members < 0 {
		return nil, fmt.Errorf("etcdproc: %d members", cfg.Members)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = defaultStopGrace
	}
	c := &Cluster{cfg: cfg}
	ms, err := c.allocate(cfg.Members)
	if err != nil {
		return nil, err
	}
	var initial []string
	for _, m := range ms {
		initial = append(initial, m.Name+"="+m.AdvertisePeerURL)
	}
	for _, m := range ms {
		m.args = c.args(m, strings.Join(initial, ","), "new")
		c.Members = append(c.Members, m)
		if err := m.start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	for _, m := range ms {
		if err := m.waitHealthy(ctx, true); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// allocate names n new members and picks their ports.
func (c *Cluster) allocate(n int) ([]*Member, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var ms []*Member
	for k := 0; k < n; k++ {
		i := c.next
		c.next++
		name := fmt.Sprintf("etcd-%d", i+1)
		if c.cfg.Name != nil {
			name = c.cfg.Name(i)
		}
		host := "127.0.0.1"
		if c.cfg.Host != nil {
			host = c.cfg.Host(i)
		}
		// Ports are held open until every member of this batch has its
		// own, so that no two members draw the same free port.
		ports := []int{StandardClientPort, StandardPeerPort, StandardMetricsPort}
		for j := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
			if err != nil {
				if isAddrNotAvail(err) {
					continue
				}
				return nil, fmt.Errorf("etcdproc: pick a port on %s: %w", host, err)
			}
			held = append(held, l)
			ports[j] = l.Addr().(*net.TCPAddr).Port
		}
		u := func(p int) string { return "http://" + net.JoinHostPort(host, strconv.Itoa(p)) }
		m := &Member{
			Name:       name,
			ClientURL:  u(ports[0]),
			PeerURL:    u(ports[1]),
			MetricsURL: u(ports[2]) + "/metrics",
			DataDir:    c.cfg.Dir + "/" + name,
			index:      i,
			cluster:    c,
			tail:       newTailWriter(name, c.cfg.Stdout),
		}
		m.AdvertisePeerURL = m.PeerURL
		if c.cfg.AdvertisePeerURL != nil {
			m.AdvertisePeerURL = c.cfg.AdvertisePeerURL(i, m.PeerURL)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func isAddrNotAvail(err error) bool {
	return errors.Is(err, syscall.EADDRNOTAVAIL)
}

func (c *Cluster) args(m *Member, initial, state string) []string {
	a := []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.AdvertisePeerURL,
		"--listen-metrics-urls=" + strings.TrimSuffix(m.MetricsURL, "/metrics"),
		"--initial-cluster=" + initial,
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=fleet-role",
	}
	if d := c.cfg.HeartbeatInterval; d > 0 {
		a = append(a, "--heartbeat-interval="+strconv.FormatInt(d.Milliseconds(), 10))
	}
	if d := c.cfg.ElectionTimeout; d > 0 {
		a = append(a, "--election-timeout="+strconv.FormatInt(d.Milliseconds(), 10))
	}
	if q := c.cfg.QuotaBackendBytes; q > 0 {
		a = append(a, "--quota-backend-bytes="+strconv.FormatInt(q, 10))
	}
	return a
}

// start launches the member's process with its arguments.
func (m *Member) start() error {
	var cmd *exec.Cmd
	if f := m.cluster.cfg.Command; f != nil {
		cmd = f(m.index, m.cluster.cfg.Binary, m.args)
	} else {
		cmd = exec.Command(m.cluster.cfg.Binary, m.args...)
	}
	cmd.Stdout = m.tail
	cmd.Stderr = m.tail
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// If the test binary dies without running Stop, the kernel kills the
	// member: no process may outlive its test.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdproc: start %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.pid, m.done, m.err = cmd, cmd.Process.Pid, done, nil
	m.mu.Unlock()
	go func() {
		err := cmd.Wait()
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
		close(done)
	}()
	return nil
}

// PID is the process ID of the member's current process (0 before start).
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pid
}

// Running reports whether the member's current process has not exited.
func (m *Member) Running() bool {
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// LogTail is the last lines the member's processes wrote.
func (m *Member) LogTail() string { return m.tail.Tail() }

func (m *Member) signal(sig syscall.Signal) error {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("etcdproc: %s was never started", m.Name)
	}
	select {
	case <-done:
		return fmt.Errorf("etcdproc: %s is not running", m.Name)
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("etcdproc: signal %s: %w", m.Name, err)
	}
	return nil
}

// Pause stops the member's process (SIGSTOP): it keeps its sockets, accepts
// connections and answers nothing, as a member that has frozen does. The
// signal is delivered asynchronously, so Pause returns once the kernel
// reports the process stopped (state T in /proc/PID/stat).
func (m *Member) Pause() error {
	if err := m.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := m.PID()
	deadline := time.Now().Add(statusTimeout)
	for {
		st, err := procState(pid)
		if err != nil || st == "T" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdproc: %s (pid %d) still in state %s after SIGSTOP", m.Name, pid, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// procState is the one-letter state of a process from /proc/PID/stat (the
// field after the parenthesised command name).
func procState(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", fmt.Errorf("read state of pid %d: %w", pid, err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) == 0 {
		return "", fmt.Errorf("read state of pid %d: short stat line", pid)
	}
	return f[0], nil
}

// Resume continues a paused member (SIGCONT).
func (m *Member) Resume() error { return m.signal(syscall.SIGCONT) }

// Kill kills the member's process (SIGKILL) and waits for it to exit.
func (m *Member) Kill() error {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Kill()
	<-done
	return nil
}

// stop sends SIGTERM, waits up to grace, then kills.
func (m *Member) stop(grace time.Duration) {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	// A paused member handles no SIGTERM until it is continued.
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart kills the member if it still runs, starts it again on the same
// data directory and ports, and waits until it is healthy again.
func (m *Member) Restart(ctx context.Context) error {
	if err := m.Kill(); err != nil {
		return err
	}
	// The data directory already holds the membership; etcd ignores the
	// initial-cluster flags on a restart.
	if err := m.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cluster.cfg.StartTimeout)
	defer cancel()
	return m.waitHealthy(ctx, false)
}

// waitHealthy polls the member's status until it answers, knows its ID and
// sees a leader. A voter must also pass its own /health check.
func (m *Member) waitHealthy(ctx context.Context, voter bool) error {
	var last error
	for {
		m.mu.Lock()
		done := m.done
		m.mu.Unlock()
		select {
		case <-done:
			m.mu.Lock()
			err := m.err
			m.mu.Unlock()
			return fmt.Errorf("etcdproc: %s exited while starting (%v); log tail:\n%s", m.Name, err, m.LogTail())
		default:
		}
		st, err := m.Status(ctx)
		switch {
		case err != nil:
			last = err
		case st.Leader == 0:
			last = fmt.Errorf("%s sees no leader yet", m.Name)
		default:
			m.setID(st.Header.MemberId)
			if !voter {
				return nil
			}
			if err := m.health(ctx); err != nil {
				last = err
			} else {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdproc: %s not healthy: %w (last: %v); log tail:\n%s", m.Name, ctx.Err(), last, m.LogTail())
		case <-time.After(pollInterval):
		}
	}
}

// health asks the member's metrics listener for /health, which etcd answers
// with {"health":"true"} only when the member has a leader and can serve.
func (m *Member) health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	u := strings.TrimSuffix(m.MetricsURL, "/metrics") + "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"health":"true"`) {
		return fmt.Errorf("%s /health: %d %s", m.Name, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// setID records the member's ID. A member's ID never changes, so it is
// written once: reading m.ID after Start or AddLearner returned is safe.
func (m *Member) setID(id uint64) {
	s := strconv.FormatUint(id, 16)
	m.mu.Lock()
	if m.ID != s {
		m.ID = s
	}
	m.mu.Unlock()
}

// Status asks the member itself for its status, with a short timeout.
func (m *Member) Status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cli, err := m.cluster.client0()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := cli.Status(ctx, m.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", m.Name, err)
	}
	return st, nil
}

// client0 is the cluster's shared client. Status names its endpoint, so the
// client's own endpoint list only matters for Put and membership calls.
func (c *Cluster) client0() (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		return c.client, nil
	}
	cli, err := newClient(c.Members)
	if err != nil {
		return nil, err
	}
	c.client = cli
	return cli, nil
}

func newClient(ms []*Member) (*clientv3.Client, error) {
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.ClientURL)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: statusTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdproc: client: %w", err)
	}
	return cli, nil
}

// Client is a client of the whole cluster, closed by Stop.
func (c *Cluster) Client() (*clientv3.Client, error) { return c.client0() }

// ClientExcept is a client of every member but m, which the caller closes.
// A member asked to remove itself applies the removal and stops, and may
// answer "server stopped" for a removal that did commit: ask another.
func (c *Cluster) ClientExcept(m *Member) (*clientv3.Client, error) {
	return newClient(slices.DeleteFunc(c.members(), func(o *Member) bool { return o == m }))
}

// Leader asks every running member for its status and returns the member
// that reports itself as leader.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	var errs []error
	for _, m := range c.members() {
		if !m.Running() {
			continue
		}
		st, err := m.Status(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.setID(st.Header.MemberId)
		if st.Leader != 0 && st.Leader == st.Header.MemberId {
			return m, nil
		}
	}
	return nil, fmt.Errorf("etcdproc: no member reports itself leader: %w", errors.Join(errs...))
}

// Followers are the running members other than the leader (learners included).
func (c *Cluster) Followers(ctx context.Context) ([]*Member, error) {
	l, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	var fs []*Member
	for _, m := range c.members() {
		if m != l && m.Running() {
			fs = append(fs, m)
		}
	}
	return fs, nil
}

func (c *Cluster) members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.Members...)
}

// Put writes n keys of 256 bytes each through the cluster, one request per
// key, so that every member fsyncs its WAL and commits its backend. Pass a
// ctx with a deadline: each write is retried until it succeeds or ctx ends.
func (c *Cluster) Put(ctx context.Context, n int) error {
	cli, err := c.client0()
	if err != nil {
		return err
	}
	val := strings.Repeat("x", 256)
	for k := 0; k < n; k++ {
		c.mu.Lock()
		c.putSeq++
		key := fmt.Sprintf("fleet-role/load/%08d", c.putSeq)
		c.mu.Unlock()
		if err := c.put(ctx, cli, key, val); err != nil {
			return err
		}
	}
	return nil
}

// put writes one key, retrying until ctx ends: the client spreads requests
// over every member, and a paused member keeps its connection open and
// answers nothing, so an attempt that lands on it times out and the next
// goes elsewhere. Writing the same key twice is harmless.
func (c *Cluster) put(ctx context.Context, cli *clientv3.Client, key, val string) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, statusTimeout)
		_, err := cli.Put(pctx, key, val)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("etcdproc: put %s: %w", key, err)
		}
	}
}

// AddLearner adds one member to the running cluster as a learner, starts its
// process, and waits until it answers and sees the leader. The flow is the
// one k3s uses (docs/facts.md, k3s): MemberAddAsLearner, retried while a new
// cluster still refuses reconfiguration (ErrUnhealthy, about 5 s after
// start), then the process with initial-cluster-state=existing.
func (c *Cluster) AddLearner(ctx context.Context) (*Member, error) {
	cli, err := c.client0()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	c.mu.Lock()
	ms, err := c.allocate(1)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m := ms[0]
	var resp *clientv3.MemberAddResponse
	err = retry(ctx, "add learner "+m.Name, unhealthy, func() (err error) {
		resp, err = cli.MemberAddAsLearner(ctx, []string{m.AdvertisePeerURL})
		return err
	})
	if err != nil {
		return nil, err
	}
	m.setID(resp.Member.ID)
	var initial []string
	for _, pm := range resp.Members {
		name := pm.Name
		if pm.ID == resp.Member.ID {
			name = m.Name // not started yet, so it has no name in the list
		}
		for _, u := range pm.PeerURLs {
			initial = append(initial, name+"="+u)
		}
	}
	m.args = c.args(m, strings.Join(initial, ","), "existing")
	c.mu.Lock()
	c.Members = append(c.Members, m)
	c.mu.Unlock()
	if err := m.start(); err != nil {
		return nil, err
	}
	if err := m.waitHealthy(ctx, false); err != nil {
		m.Kill()
		return nil, err
	}
	return m, nil
}

// Promote makes learner m a voter, retrying while etcd says the learner has
// not caught up (ErrMemberLearnerNotReady).
func (c *Cluster) Promote(ctx context.Context, m *Member) error {
	cli, err := c.client0()
	if err != nil {
		return err
	}
	id, err := m.id()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	return retry(ctx, "promote "+m.Name, func(err error) bool {
		return errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || unhealthy(err)
	}, func() error {
		_, err := cli.MemberPromote(ctx, id)
		return err
	})
}

// Remove removes m from the cluster's membership and stops its process.
func (c *Cluster) Remove(ctx context.Context, m *Member) error {
	cli, err := c.client0()
	if err != nil {
		return err
	}
	id, err := m.id()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	err = retry(ctx, "remove "+m.Name, unhealthy, func() error {
		_, err := cli.MemberRemove(ctx, id)
		return err
	})
	if err != nil {
		return err
	}
	m.stop(c.cfg.StopGrace)
	return nil
}

// unhealthy is etcd refusing a membership change for now: a new cluster
// refuses reconfiguration for about 5 s after it starts (docs/testing.md,
// "What the harness rests on").
func unhealthy(err error) bool { return errors.Is(err, rpctypes.ErrUnhealthy) }

// retry calls op until it succeeds, fails with an error retryable does not
// accept, or ctx ends.
func retry(ctx context.Context, what string, retryable func(error) bool, op func() error) error {
	for {
		err := op()
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return fmt.Errorf("etcdproc: %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdproc: %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
}

func (m *Member) id() (uint64, error) {
	m.mu.Lock()
	s := m.ID
	m.mu.Unlock()
	if s == "" {
		return 0, fmt.Errorf("etcdproc: %s has no known ID yet", m.Name)
	}
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("etcdproc: %s ID %q: %w", m.Name, s, err)
	}
	return id, nil
}

// MemberID is the member's ID (unpadded lowercase hex), or "" before it is
// known. Use it rather than reading ID while other goroutines may set it.
func (m *Member) MemberID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ID
}

// Stop stops every member: followers first, then the leader last, so that
// no leader waits for a leadership transfer to peers that are still up;
// each gets SIGTERM and, after the grace, SIGKILL. It returns when every
// process has exited. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	cli := c.client
	c.client = nil
	ms := append([]*Member(nil), c.Members...)
	c.mu.Unlock()

	var leader *Member
	if cli != nil {
		for _, m := range ms {
			if !m.Running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := cli.Status(ctx, m.ClientURL)
			cancel()
			if err == nil && st.Leader == st.Header.MemberId {
				leader = m
				break
			}
		}
		cli.Close()
	}
	var wg sync.WaitGroup
	for _, m := range ms {
		if m == leader {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.stop(c.cfg.StopGrace)
		}()
	}
	wg.Wait()
	if leader != nil {
		leader.stop(c.cfg.StopGrace)
	}
}

// tailWriter keeps the last lines a member wrote and copies every line,
// prefixed with the member's name, to an optional writer.
type tailWriter struct {
	name string
	out  io.Writer

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func newTailWriter(name string, out io.Writer) *tailWriter {
	return &tailWriter{name: name, out: out}
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		w.lines = append(w.lines, line)
		if len(w.lines) > logTailLines {
			w.lines = w.lines[len(w.lines)-logTailLines:]
		}
		if w.out != nil {
			fmt.Fprintf(w.out, "[%s] %s\n", w.name, line)
		}
	}
	return len(p), nil
}

func (w *tailWriter) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.Join(w.lines, "\n")
	if len(w.partial) > 0 {
		s += "\n" + string(w.partial)
	}
	return s
}
