// Package promserver runs a real Prometheus server (built by hack/tools.sh
// prometheus from the module promtool comes from) scraping static targets
// with rule files loaded, and reads its HTTP API: the targets' health, the
// rule groups' evaluations and the alerts, as an operator's Prometheus
// would show them. It is harness, not product.
package promserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/proc"
)

// Target is one scrape target: host:port, and the labels Prometheus gives
// its series (instance and host, as the PodMonitors do).
type Target struct {
	Address string
	Labels  map[string]string
}

// Job is one scrape job of static targets.
type Job struct {
	Name    string
	Targets []Target
}

// Config is what one server scrapes and evaluates.
type Config struct {
	Binary string
	Dir    string // its config, data and log
	// RuleFiles are loaded as they are: their groups keep their own
	// evaluation interval.
	RuleFiles []string
	Jobs      []Job
	// ScrapeInterval is also the scrape timeout and the default
	// evaluation interval.
	ScrapeInterval time.Duration
}

// Server is a running Prometheus.
type Server struct {
	URL  string
	proc *proc.Proc
	http *http.Client
}

// Start writes the configuration, starts Prometheus on a free loopback
// port, and returns once it answers ready (its rules loaded, its TSDB open).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("prometheus directory: %w", err)
	}
	conf, err := config(cfg)
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(cfg.Dir, "prometheus.yml")
	if err := os.WriteFile(confPath, conf, 0o644); err != nil {
		return nil, fmt.Errorf("write prometheus config: %w", err)
	}
	port, err := apiserver.FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(cfg.Binary,
		"--config.file="+confPath,
		"--storage.tsdb.path="+filepath.Join(cfg.Dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	p, err := proc.Start("prometheus", cmd, filepath.Join(cfg.Dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + addr, proc: p, http: &http.Client{Timeout: 5 * time.Second}}
	deadline := time.Now().Add(time.Minute)
	for {
		if gone, err := p.Exited(); gone {
			return nil, fmt.Errorf("prometheus exited before it was ready (%v):\n%s", err, s.LogTail())
		}
		resp, err := s.http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("prometheus not ready at %s within a minute (%v):\n%s", s.URL, err, s.LogTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// config is prometheus.yml for cfg.
func config(cfg Config) ([]byte, error) {
	iv := cfg.ScrapeInterval.String()
	type static struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	type job struct {
		Name   string   `json:"job_name"`
		Static []static `json:"static_configs"`
	}
	var jobs []job
	for _, j := range cfg.Jobs {
		x := job{Name: j.Name}
		for _, t := range j.Targets {
			x.Static = append(x.Static, static{Targets: []string{t.Address}, Labels: t.Labels})
		}
		jobs = append(jobs, x)
	}
	b, err := yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": iv, "scrape_timeout": iv, "evaluation_interval": iv},
		"rule_files":     cfg.RuleFiles,
		"scrape_configs": jobs,
	})
	if err != nil {
		return nil, fmt.Errorf("prometheus config: %w", err)
	}
	return b, nil
}

// Stop stops the server.
func (s *Server) Stop() { s.proc.Stop(10 * time.Second) }

// LogTail is the end of the server's log, for a failure's message.
func (s *Server) LogTail() string {
	b, err := os.ReadFile(s.proc.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// get reads an API path's data into v.
func (s *Server) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("prometheus %s: %d %q: %w", path, resp.StatusCode, body, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("prometheus %s: %s", path, env.Error)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	return nil
}

// Alert is one alert as /api/v1/alerts gives it.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending or firing
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// Alerts are the alerts pending or firing now.
func (s *Server) Alerts(ctx context.Context) ([]Alert, error) {
	var d struct {
		Alerts []Alert `json:"alerts"`
	}
	err := s.get(ctx, "/api/v1/alerts", &d)
	return d.Alerts, err
}

// TargetHealth is one active target's last scrape.
type TargetHealth struct {
	Labels     map[string]string `json:"labels"`
	Health     string            `json:"health"` // up, down, unknown
	LastScrape time.Time         `json:"lastScrape"`
	LastError  string            `json:"lastError"`
}

// Targets are the active targets.
func (s *Server) Targets(ctx context.Context) ([]TargetHealth, error) {
	var d struct {
		Active []TargetHealth `json:"activeTargets"`
	}
	err := s.get(ctx, "/api/v1/targets?state=active", &d)
	return d.Active, err
}

// LastEvaluations is when each rule group was last evaluated, by name.
func (s *Server) LastEvaluations(ctx context.Context) (map[string]time.Time, error) {
	var d struct {
		Groups []struct {
			Name           string    `json:"name"`
			LastEvaluation time.Time `json:"lastEvaluation"`
		} `json:"groups"`
	}
	if err := s.get(ctx, "/api/v1/rules", &d); err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, g := range d.Groups {
		out[g.Name] = g.LastEvaluation
	}
	if len(out) == 0 {
		return nil, errors.New("prometheus has no rule group loaded")
	}
	return out, nil
}
