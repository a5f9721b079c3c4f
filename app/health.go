package app

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/migrations"
	"switchyard/services"
	"switchyard/services/resilience"
)

// healthReport is the admin body of GET /api/monitoring/health. Sections for
// mechanisms that later work adds (breakers, lockouts, queues) join it there.
type healthReport struct {
	Status   string         `json:"status"`
	Reasons  []string       `json:"reasons"`
	Time     string         `json:"time"`
	Version  string         `json:"version"`
	UptimeS  int64          `json:"uptimeS"`
	Database healthDatabase `json:"database"`
	Runtime  healthRuntime  `json:"runtime"`
	Demo     bool           `json:"demo"`
	KeyID    string         `json:"secretKeyId"`
	Listen   string         `json:"listenAddr"`
	Counts   map[string]int `json:"counts"`

	Breakers            []resilience.BreakerStatus    `json:"breakers"`
	WindowGate          []resilience.WindowGateStatus `json:"windowGate"`
	CoolingConnections  []healthCooling               `json:"coolingConnections"`
	TerminalConnections []healthTerminal              `json:"terminalConnections"`
	ModelLockouts       struct {
		Active int `json:"active"`
	} `json:"modelLockouts"`
	RequestLog struct {
		QueueDepth int64 `json:"queueDepth"`
		Dropped    int64 `json:"dropped"`
	} `json:"requestLog"`
}

type healthCooling struct {
	ID               string `json:"id"`
	Provider         string `json:"provider"`
	Name             string `json:"name"`
	RateLimitedUntil string `json:"rateLimitedUntil"`
	RemainingMs      int64  `json:"remainingMs"`
	BackoffLevel     int    `json:"backoffLevel"`
	LastErrorReason  string `json:"lastErrorReason"`
}

type healthTerminal struct {
	ID             string `json:"id"`
	Provider       string `json:"provider"`
	Name           string `json:"name"`
	TerminalStatus string `json:"terminalStatus"`
	TerminalAt     string `json:"terminalAt,omitempty"`
}

type healthDatabase struct {
	OK            bool    `json:"ok"`
	PingMs        float64 `json:"pingMs"`
	SchemaVersion string  `json:"schemaVersion"`
	WalBytes      int64   `json:"walBytes"`
	Path          string  `json:"path"`
}

type healthRuntime struct {
	GoVersion      string `json:"goVersion"`
	Goroutines     int    `json:"goroutines"`
	HeapInuseBytes uint64 `json:"heapInuseBytes"`
}

// healthCache builds the admin report at most once per second.
type healthCache struct {
	mu    sync.Mutex
	at    time.Time
	value healthReport
}

// Report builds the health report (Health page and API twin).
func (s *Server) Report(ctx context.Context) healthReport {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	now := s.clock.Now()
	if !s.health.at.IsZero() && now.Sub(s.health.at) < time.Second && s.health.value.Version != "" {
		return s.health.value
	}
	r := healthReport{Status: "ok", Reasons: []string{}, Time: now.UTC().Format("2006-01-02T15:04:05.000Z"), Version: Version,
		UptimeS: int64(now.Sub(s.startedAt).Seconds()), Demo: s.cfg.Demo, KeyID: s.keyring.KeyID(), Listen: s.listenAddr.Load().(string)}
	dbPath := filepath.Join(s.cfg.DataDir, "switchyard.db")
	r.Database.Path = dbPath
	r.Database.SchemaVersion = strings.TrimSuffix(migrations.Latest(), ".sql")
	start := time.Now()
	if sqlDB, err := s.db.DB(); err == nil && sqlDB.PingContext(ctx) == nil {
		r.Database.OK = true
		r.Database.PingMs = float64(time.Since(start).Microseconds()) / 1000
	} else {
		r.Status = "down"
		r.Reasons = append(r.Reasons, "database_unreachable")
	}
	if fi, err := os.Stat(dbPath + "-wal"); err == nil {
		r.Database.WalBytes = fi.Size()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.Runtime = healthRuntime{GoVersion: runtime.Version(), Goroutines: runtime.NumGoroutine(), HeapInuseBytes: ms.HeapInuse}
	r.Counts = map[string]int{}
	r.Breakers = s.resilience.Breakers.All()
	r.WindowGate = s.resilience.Gate.Entries()
	r.CoolingConnections, r.TerminalConnections = []healthCooling{}, []healthTerminal{}
	r.ModelLockouts.Active = s.resilience.Lockouts.Count()
	st := s.logWriter.Stats()
	r.RequestLog.QueueDepth, r.RequestLog.Dropped = st.QueueDepth, st.Dropped
	for _, b := range r.Breakers {
		if b.State == resilience.BreakerOpen || b.State == resilience.BreakerHalfOpen {
			r.Reasons = append(r.Reasons, "breaker_open:"+b.Provider)
		}
	}
	if cs, err := s.conns.List(ctx, services.ConnectionFilter{}); err == nil {
		r.Counts["connections"] = len(cs)
		terminal := 0
		for _, c := range cs {
			cst := s.resilience.Cooldowns.State(c.ID)
			switch {
			case cst.TerminalStatus != "":
				if c.Enabled {
					terminal++
				}
				t := healthTerminal{ID: c.ID, Provider: c.Provider, Name: c.Name, TerminalStatus: cst.TerminalStatus}
				if cst.TerminalAt != nil {
					t.TerminalAt = cst.TerminalAt.UTC().Format("2006-01-02T15:04:05.000Z")
				}
				r.TerminalConnections = append(r.TerminalConnections, t)
			case cst.RateLimitedUntil != nil && cst.RateLimitedUntil.After(now):
				r.CoolingConnections = append(r.CoolingConnections, healthCooling{ID: c.ID, Provider: c.Provider, Name: c.Name,
					RateLimitedUntil: cst.RateLimitedUntil.UTC().Format("2006-01-02T15:04:05.000Z"), RemainingMs: cst.RateLimitedUntil.Sub(now).Milliseconds(),
					BackoffLevel: cst.BackoffLevel, LastErrorReason: cst.LastErrorReason})
			}
		}
		if terminal > 0 {
			r.Reasons = append(r.Reasons, "terminal_connections:"+itoa(terminal))
		}
	}
	if st.Dropped > 0 {
		r.Reasons = append(r.Reasons, "request_log_drops")
	}
	if r.Status == "ok" && len(r.Reasons) > 0 {
		r.Status = "degraded"
	}
	s.health.at, s.health.value = now, r
	return r
}

// monitoringHealth is public in its minimal form; an admin credential (session
// or manage key) gets the full report.
func (s *Server) monitoringHealth(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	admin := false
	if h := c.Request().Header.Get("Authorization"); h != "" {
		if scheme, token, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			if k, err := s.keys.Authenticate(strings.TrimSpace(token)); err == nil && k.HasScope(services.ScopeManage) {
				admin = true
			}
		}
	} else if id := s.cookies.Read(c.Request()); id != "" {
		if _, err := s.auth.Session(c.Request().Context(), id); err == nil {
			admin = true
		}
	}
	r := s.Report(c.Request().Context())
	status := http.StatusOK
	if r.Status == "down" {
		status = http.StatusServiceUnavailable
		c.Response().Header().Set("Retry-After", "5")
	}
	if !admin {
		minimal := "ok"
		if r.Status == "down" {
			minimal = "down"
		}
		return c.JSON(status, map[string]string{"status": minimal})
	}
	return c.JSON(status, r)
}
