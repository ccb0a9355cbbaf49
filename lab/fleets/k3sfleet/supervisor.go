package k3sfleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/lab/run/proc"
)

// The k3s restart protocol between a host's own filesystem and the lab. A
// real host restarts k3s through its service manager; a lab host has none
// (k3s is a process of this test), so the lab carries the restart out for
// whoever asks from inside the host: internal/actuator's file restarter,
// which fleet-role's actuator uses in the lab, writes the request, and the
// tests that stand in for the actuator write it the same way.
//
// The requester writes a token (one line, any text; a new one for every
// restart) to RestartRequestFile in LabDir, by writing a temporary file in
// LabDir and renaming it over the request, so that the supervisor never
// reads half a token. When the token differs from the last one handled on
// that host, the supervisor restarts the host's k3s (Host.RestartK3s:
// SIGTERM, then a new k3s with the same command line, which reads its
// configuration drop-ins again) and then writes the same token to
// RestartDoneFile (a temporary file renamed over it). A done token says
// the new k3s process has started, not that k3s is up: the requester
// waits for what it needs (a member, a Ready Node). A token already in
// RestartDoneFile when the supervisor starts counts as handled.
const (
	// LabDir is the lab's directory on every host: a memory filesystem of
	// the host's own (hostDirs), so it is inside the host's mount
	// namespace, seen by the host's processes (a pod with the host's /run
	// mounted) and gone with the host.
	LabDir = "/run/fleet-role-lab"
	// RestartRequestFile holds the token of the latest restart requested.
	RestartRequestFile = "k3s-restart.request"
	// RestartDoneFile holds the token of the latest restart carried out.
	RestartDoneFile = "k3s-restart.done"
)

// Restart is one k3s restart the supervisor carried out: asked for by a
// token, or, with Config.RestartOnExit, after k3s exited on its own
// (Exited set, Token empty).
type Restart struct {
	Host  string
	Token string
	// Exited is how the k3s started again had ended, when it ended on
	// its own; Log the tail of its log, Crash where that log says it
	// crashed (proc.Crash), if it did.
	Exited string
	Log    string
	Crash  string
	// Seen is when the supervisor read the request, Done when it wrote
	// the done token (after the new k3s process started).
	Seen, Done time.Time
	Err        error
}

// supervisor polls every host's request file from the moment the fleet is
// formed until teardown.
type supervisor struct {
	f    *Fleet
	quit chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	restarts []Restart
}

// superviseRestarts starts one poller a host, so that one host's restart
// (up to stopGrace for the old k3s to stop) never delays another's.
func (f *Fleet) superviseRestarts() *supervisor {
	s := &supervisor{f: f, quit: make(chan struct{})}
	for _, h := range f.Hosts {
		last, _ := readToken(h.File(filepath.Join(LabDir, RestartDoneFile)))
		s.wg.Add(1)
		go s.watch(h, last)
	}
	f.t.Logf("restart supervisor: polling %s/%s on every host every %v", LabDir, RestartRequestFile, pollInterval)
	return s
}

// watch carries out host h's requests until the supervisor stops; last is
// the token handled last.
func (s *supervisor) watch(h *Host, last string) {
	defer s.wg.Done()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	request := h.File(filepath.Join(LabDir, RestartRequestFile))
	done := h.File(filepath.Join(LabDir, RestartDoneFile))
	var exitSeen time.Time // when k3s was first seen exited, for RestartOnExit
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
		if s.f.cfg.RestartOnExit {
			p := h.K3s()
			if gone, err := p.Exited(); gone {
				if exitSeen.IsZero() {
					exitSeen = time.Now()
					s.f.t.Logf("restart supervisor: %s's k3s exited (%v); started again in %v, as systemd's Restart=always does", h.Name, err, ServiceRestartDelay)
				}
				if time.Since(exitSeen) < ServiceRestartDelay {
					continue
				}
				how := "exit status 0"
				if err != nil {
					how = err.Error()
				}
				r := Restart{Host: h.Name, Exited: how, Log: p.Tail(15), Crash: proc.Crash(p.Log, 40), Seen: exitSeen}
				if err := h.startK3s(); err != nil {
					r.Err = fmt.Errorf("start %s's k3s again after its exit: %w", h.Name, err)
					s.f.t.Errorf("restart supervisor: %v", r.Err)
				}
				r.Done = time.Now()
				exitSeen = time.Time{}
				s.mu.Lock()
				s.restarts = append(s.restarts, r)
				s.mu.Unlock()
				continue
			}
		}
		token, err := readToken(request)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				s.f.t.Errorf("restart supervisor: %s: %v", h.Name, err)
			}
			continue
		}
		if token == "" || token == last {
			continue
		}
		r := Restart{Host: h.Name, Token: token, Seen: time.Now()}
		s.f.t.Logf("restart supervisor: %s asks for a k3s restart (token %q)", h.Name, token)
		if err := h.RestartK3s(); err != nil {
			r.Err = fmt.Errorf("restart %s's k3s: %w", h.Name, err)
		} else if err := writeToken(done, token); err != nil {
			r.Err = fmt.Errorf("%s: write the done token: %w", h.Name, err)
		}
		r.Done = time.Now()
		last = token // a failed restart is not retried: the request is answered by the test's failure
		s.mu.Lock()
		s.restarts = append(s.restarts, r)
		s.mu.Unlock()
		if r.Err != nil {
			s.f.t.Errorf("restart supervisor: %v", r.Err)
			continue
		}
		s.f.t.Logf("restart supervisor: %s's k3s restarted in %.1f s (token %q)", h.Name, r.Done.Sub(r.Seen).Seconds(), token)
	}
}

// stop ends every poller and waits for a restart under way to finish.
func (s *supervisor) stop() {
	close(s.quit)
	s.wg.Wait()
}

// Restarts are the k3s restarts the supervisor carried out so far, in the
// order they ended.
func (f *Fleet) Restarts() []Restart {
	if f.sup == nil {
		return nil
	}
	f.sup.mu.Lock()
	defer f.sup.mu.Unlock()
	return append([]Restart(nil), f.sup.restarts...)
}

// readToken reads a token file: its first line, trimmed.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}

// writeToken writes token to path through a temporary file in the same
// directory renamed over it, so a reader sees the old token or the new one.
func writeToken(path, token string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(token + "\n"); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// WriteToken writes a token file as the restart protocol asks of both
// sides: a temporary file in the same directory renamed over path. A test
// that stands in for the actuator requests a restart with it, at
// Host.File(LabDir + "/" + RestartRequestFile).
func WriteToken(path, token string) error { return writeToken(path, token) }
