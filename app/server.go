package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"math/rand/v2"

	"switchyard/models"
	"switchyard/services"
	"switchyard/services/affinity"
	"switchyard/services/events"
	"switchyard/services/gateway"
	"switchyard/services/leases"
	"switchyard/services/quota"
	"switchyard/services/requestlog"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/settings"
	"switchyard/services/stats"
	"switchyard/services/tracing"
	"switchyard/services/traffic"
)

// Options carry what differs between production and tests.
type Options struct {
	Clock  services.Clock
	Logger *slog.Logger
	Stdout io.Writer
	// Argon2 overrides password hashing cost (tests use a cheap set).
	Argon2 *services.Argon2Params
	// Seed fixes the routing RNG (tests); 0 picks a random seed.
	Seed uint64
}

// Server is a built Switchyard: services wired, routes registered.
type Server struct {
	cfg       Config
	log       *slog.Logger
	clock     services.Clock
	db        *gorm.DB
	keyring   *services.Keyring
	catalogue *services.CatalogueHolder
	egress    *services.EgressGuard
	settings  *models.SettingsStore
	feed      services.ChangeFeed
	localFeed *services.LocalFeed
	shared    *sharedState
	conns     *services.Connections
	combos    *services.Combos
	keys      *services.Keys
	auth      *services.Auth
	cookies   *cookieSessions
	gateway   *gateway.Gateway
	logSink   gateway.LogSink
	logStore  *models.RequestLogStore
	logWriter *requestlog.Writer
	// traffic is the last 24 hours in one-minute buckets (Overview,
	// GET /api/metrics/summary), fed by the request-log writer.
	traffic *stats.Recorder
	// prices is the model price table with the admin's overrides.
	prices      *services.Prices
	auditStore  *models.AuditStore
	auditWriter *requestlog.Batcher[services.AuditEntry]
	metrics     *metrics
	settingsSvc *resilience.SettingsService
	settingDocs SettingsDocs
	gwSettings  *settings.Derived[settings.General, gateway.Configured]
	slots       *traffic.Slots
	slotStore   traffic.SlotStore
	rateStore   traffic.RateStore
	// waiting lists the requests waiting now on this replica (cooldown,
	// slot and queue waits).
	waiting    *traffic.Waiting
	redis      *redisState
	queues     *traffic.Queues
	routeState *routing.MemoryState
	learned    *learnedPersister
	decisions  *decisionFlusher
	pins       *affinity.Pins
	leases     *leases.Leases
	toolLimits *gateway.ToolLimits
	keyLimits  *traffic.KeyLimits // this replica's per-key state
	keyLimiter traffic.KeyLimiter // what admits: keyLimits, or the fleet-wide one over it
	quota      *quota.Tracker
	resilience *resilience.Engine
	status     *resilience.Monitor
	echo       *echo.Echo
	handler    http.Handler
	startedAt  time.Time

	health healthCache
	purge  *retention
	// ready is set once the snapshot every request reads (connections,
	// combos, keys, settings) is loaded: from then on the replica can serve
	// /v1 from memory whatever the database does (the readiness the health
	// endpoint reports in shared mode).
	ready      atomic.Bool
	listenAddr atomic.Value // string
	loopback   atomic.Bool
	demo       *demoEnv
	// tracing exports OpenTelemetry traces; nil when off (app/tracing.go).
	tracing *tracing.Provider
	// events are this replica's last resilience events (Runtime page,
	// GET /api/resilience/events).
	events *events.Ring
}

// Build opens the store, wires services and registers routes. The caller
// must Close the server.
func Build(ctx context.Context, cfg Config, opts Options) (*Server, error) {
	if cfg.egress == nil {
		if err := cfg.validate(); err != nil {
			return nil, err
		}
	}
	if opts.Clock == nil {
		opts.Clock = services.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Seed == 0 {
		opts.Seed = rand.Uint64()
	}
	db, keyring, err := openStore(ctx, cfg, opts.Clock, opts.Logger)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: opts.Logger, clock: opts.Clock, db: db, keyring: keyring, egress: cfg.egress, startedAt: opts.Clock.Now()}
	s.loopback.Store(true)
	s.listenAddr.Store(cfg.Addr)
	if err := s.wire(ctx, opts); err != nil {
		s.stopTracing()
		models.Close(db)
		return nil, err
	}
	return s, nil
}

// wire builds every store and service in dependency order, then the
// routes, and starts the background loops last.
func (s *Server) wire(ctx context.Context, opts Options) error {
	if err := s.wireDomain(ctx); err != nil {
		return err
	}
	if err := s.wireAuth(ctx, opts); err != nil {
		return err
	}
	if err := s.wireSettings(ctx); err != nil {
		return err
	}
	s.events = events.NewRing(s.clock)
	if err := s.wireResilience(ctx); err != nil {
		return err
	}
	s.metrics.reg.MustRegister(newStateCollector(s))
	s.wireLogs()
	if err := s.wireTraffic(ctx); err != nil {
		return err
	}
	if err := s.startTracing(ctx); err != nil {
		return err
	}
	if err := s.wireGateway(ctx, opts.Seed); err != nil {
		return err
	}
	s.wireFeed()
	if s.shared != nil {
		s.wireShared()
	}
	s.status = s.newMonitor()
	if s.cfg.Demo {
		var err error
		if s.demo, err = startDemo(ctx, s); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	s.wireHTTP()
	// Last: nothing after it can fail, so no failed Build leaks the loops.
	s.startLoops()
	return nil
}

// wireDomain opens the connection, combo and key stores and their services,
// with the metrics, the Redis state and the change feed they report to.
func (s *Server) wireDomain(ctx context.Context) error {
	connStore := models.NewConnectionStore(s.db, s.keyring)
	customs, err := connStore.ListCustomProviders(ctx)
	if err != nil {
		return err
	}
	// Decrypting every connection at start fails closed on a wrong key.
	if _, err := connStore.ListConnections(ctx); err != nil {
		return fmt.Errorf("start-up refused: %w", err)
	}
	s.metrics = newMetrics()
	s.metrics.log = s.log.With("component", "store")
	if s.cfg.RedisURL != "" {
		if s.redis, err = newRedisState(s); err != nil {
			return err
		}
	}
	s.localFeed = newFeed(s)
	s.feed = s.localFeed
	if s.cfg.Shared() {
		s.shared = newSharedState(s)
		s.feed = s.shared.feed
	}
	s.catalogue = services.NewCatalogueHolder(services.NewCatalogue(customs))
	s.settings = models.NewSettingsStore(s.db)
	s.conns = services.NewConnections(connStore, s.clock, s.egress, s.catalogue, s.feed)
	s.combos = services.NewCombos(models.NewComboStore(s.db), connStore, s.clock, s.catalogue, s.feed)
	keyStore := models.NewKeyStore(s.db)
	if s.keys, err = services.NewKeys(ctx, keyStore, connStore, s.clock, s.feed); err != nil {
		return err
	}
	s.conns.UseReferenceStores(models.NewComboStore(s.db), keyStore)
	return nil
}

// wireAuth builds the admin sign-in (its throttle shared by the fleet in
// shared mode) and sets the first password.
func (s *Server) wireAuth(ctx context.Context, opts Options) error {
	params := services.DefaultArgon2
	if opts.Argon2 != nil {
		params = *opts.Argon2
	}
	var err error
	if s.auth, err = services.NewAuth(ctx, models.NewAdminStore(s.db), s.clock, params); err != nil {
		return err
	}
	if s.cfg.Shared() {
		// Sign-in failures are counted for the fleet in admin_login_failures;
		// while the database does not answer, this replica counts its own.
		s.auth.UseLoginThrottle(services.NewFleetLoginThrottle(models.NewLoginThrottleStore(s.db),
			services.NewMemoryLoginThrottle(), s.log.With("component", "auth"),
			func(error) { s.metrics.sharedFallbacks.WithLabelValues("login_throttle").Inc() }))
	}
	return s.auth.BootstrapPassword(ctx, s.cfg.AdminPassword)
}

// wireLogs builds the prices, the traffic recorder and the batch writers of
// the request log and the audit log.
func (s *Server) wireLogs() {
	s.prices = services.NewPrices(func() *map[string]services.ModelPrice { return &s.settingDocs.General.Current().Doc.Pricing.Models })
	s.traffic = stats.NewRecorder(s.clock)
	s.logStore = models.NewRequestLogStore(s.db)
	s.logStore.OnSlowPath(func(reason error) {
		s.log.Warn("request log: SQLite C-API writer unavailable, writing through GORM (slower, nothing lost)", "reason", reason)
	})
	s.logWriter = requestlog.New(countingSink{stats: s.traffic, next: s.logStore}, s.log.With("component", "request-log"), requestlog.Options{})
	s.logSink = logSink{w: s.logWriter, prices: s.prices}
	s.auditStore = models.NewAuditStore(s.db)
	s.auditWriter = requestlog.NewBatcher(s.auditStore.WriteAuditEntries, "audit log", s.log.With("component", "audit-log"), requestlog.Options{})
}

// wireHTTP builds the cookie sessions, the routes and the handler with its
// request-body deadlines.
func (s *Server) wireHTTP() {
	s.cookies = newCookieSessions(s.keyring)
	s.echo = s.routes()
	bt := s.cfg.Body
	if bt == (BodyTimeouts{}) {
		bt = DefaultBodyTimeouts()
	}
	s.handler = withBodyDeadline(bt, s.echo)
}

// startLoops starts the background loops: the shared-state followers, the
// learned-limit persister, the decision flusher and the retention purge.
func (s *Server) startLoops() {
	if s.shared != nil {
		s.shared.start()
	}
	if s.redis != nil {
		s.redis.start()
	}
	s.learned = startLearnedPersister(s.queues, learnedPersistTick, func(err error) { s.metrics.StoreError("learned_rate_limits", err) })
	s.decisions = startDecisionFlusher(s.resilience, decisionFlushEvery, func(err error) { s.metrics.StoreError("resilience", err) })
	s.startRetention()
	s.ready.Store(true)
}

// Handler is the HTTP handler of the whole product, request-body bounds
// included.
func (s *Server) Handler() http.Handler { return s.handler }

// Echo is the router inside Handler (route-walk tests enumerate it).
func (s *Server) Echo() *echo.Echo { return s.echo }

// SetListenAddr records where the listener is, for the dashboard.
func (s *Server) SetListenAddr(addr string, loopback bool) {
	s.listenAddr.Store(addr)
	s.loopback.Store(loopback)
}

func (s *Server) listenPort() string {
	_, port, _ := net.SplitHostPort(s.listenAddr.Load().(string))
	return port
}

// Close stops background work and closes the database.
func (s *Server) Close() error {
	if s.shared != nil {
		s.shared.stop()
	}
	if s.redis != nil {
		s.redis.stop()
	}
	if s.demo != nil {
		s.demo.Close()
	}
	s.purge.close()
	s.keys.WaitTouches()
	s.flushResilience(s.log)
	if s.gateway != nil {
		s.gateway.WaitRelayWrites()
	}
	if s.toolLimits != nil {
		s.toolLimits.WaitPublished()
	}
	if s.metrics != nil && s.metrics.usage != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.metrics.usage.Close(ctx); err != nil {
			s.log.Warn("connection last-used times not written at shutdown", "err", err)
		}
		cancel()
	}
	if s.learned != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.learned.Close(ctx); err != nil {
			s.log.Warn("learned rate limits: not written at shutdown", "err", err)
		}
		cancel()
	}
	if s.quota != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.quota.Close(ctx); err != nil {
			s.log.Warn("quota windows: rows not written at shutdown", "err", err)
		}
		cancel()
	}
	if s.logWriter != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.logWriter.Close(ctx); err != nil {
			s.log.Warn("request log: entries lost at shutdown", "err", err)
		}
		cancel()
	}
	if s.auditWriter != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.auditWriter.Close(ctx); err != nil {
			s.log.Warn("audit log: entries lost at shutdown", "err", err)
		}
		cancel()
	}
	// After the request log: the last requests' spans are ended by now.
	s.stopTracing()
	return models.Close(s.db)
}

// healthz is the public liveness probe: {"status":"ok"}, or 503 when the
// database does not answer. It reveals nothing else.
//
// In shared mode a database outage is not a reason to restart a replica
// (a restart could not even start until the database is back, and would
// throw away the mirrors /v1 is served from), so there it answers 200 while
// the process serves: {"status":"ok"}, or {"status":"degraded"} while the
// database is unreachable. Readiness is GET /api/monitoring/health.
func (s *Server) healthz(c echo.Context) error {
	if s.cfg.Shared() {
		c.Response().Header().Set("Cache-Control", "no-store")
		r := s.HealthReport(c.Request().Context())
		return c.JSON(http.StatusOK, r.Public())
	}
	sqlDB, err := s.db.DB()
	if err == nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		err = sqlDB.PingContext(ctx)
		cancel()
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	if err != nil {
		c.Response().Header().Set("Retry-After", "5")
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "down"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func encodeB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func decodeKeyCheck(doc []byte) ([]byte, error) {
	var v struct {
		Check string `json:"check"`
	}
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(v.Check)
}

// Accessors for tests and the demo.
func (s *Server) Connections() *services.Connections { return s.conns }
func (s *Server) Combos() *services.Combos           { return s.combos }
func (s *Server) Keys() *services.Keys               { return s.keys }
func (s *Server) Auth() *services.Auth               { return s.auth }
func (s *Server) Egress() *services.EgressGuard      { return s.egress }

// Gateway returns the proxy engine (tests tune its settings).
func (s *Server) Gateway() *gateway.Gateway { return s.gateway }

// Quota returns the learned quota windows of every connection.
func (s *Server) Quota() *quota.Tracker { return s.quota }

// RequestLogs returns the request-log store (tests and the logs pages).
func (s *Server) RequestLogs() *models.RequestLogStore { return s.logStore }

// AuditLog returns the audit-log store (tests).
func (s *Server) AuditLog() *models.AuditStore { return s.auditStore }

// AuditLogStats reports the audit batch writer's counters.
func (s *Server) AuditLogStats() requestlog.Stats { return s.auditWriter.Stats() }

// RequestLogStats reports the batch writer's counters.
func (s *Server) RequestLogStats() requestlog.Stats { return s.logWriter.Stats() }

// Resilience returns the resilience engine (tests, runtime pages).
func (s *Server) Resilience() *resilience.Engine { return s.resilience }

// Pins returns the session-affinity pins (tests).
func (s *Server) Pins() *affinity.Pins { return s.pins }

// Events returns this replica's ring of recent resilience events.
func (s *Server) Events() *events.Ring { return s.events }

// Slots returns the connection slots (tests, runtime pages).
func (s *Server) Slots() *traffic.Slots { return s.slots }

// KeyLimits returns the per-key limiter of client keys (tests).
func (s *Server) KeyLimits() *traffic.KeyLimits { return s.keyLimits }

// Queues returns the request queues of rate-limit protection (tests).
func (s *Server) Queues() *traffic.Queues { return s.queues }

// Settings returns the settings service (tests).
func (s *Server) Settings() *resilience.SettingsService { return s.settingsSvc }

// Feed returns the change feed every cache of config and settings follows
// (tests drive it as another replica would).
func (s *Server) Feed() services.ChangeFeed { return s.feed }
