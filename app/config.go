// Package app wires Switchyard together: configuration, database, services,
// the echo server with its routes and middleware, and the process lifecycle.
package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/tracing"
)

// BodyTimeouts bound the reading of request bodies (issue 17): a client
// must send the first byte within FirstByte of the headers, keep up at
// least MinRate bytes per second after that (each byte buys 1/MinRate s
// more, as Apache's mod_reqtimeout counts it), and finish within Total —
// ClientAPITotal on the client API, whose bodies are larger — or the read
// fails and the connection is closed. Responses are not bounded: streams
// run as long as they need.
type BodyTimeouts struct {
	FirstByte      time.Duration
	Total          time.Duration
	ClientAPITotal time.Duration
	MinRate        int64 // bytes per second; 0 = no rate floor
}

// DefaultBodyTimeouts are the production defaults: 10 s to the first byte,
// 30 s for dashboard and /api bodies (≤ 1 MiB), 120 s for client API bodies
// (a 32 MiB body needs about 280 KiB/s), 1 KiB/s minimum rate.
func DefaultBodyTimeouts() BodyTimeouts {
	return BodyTimeouts{FirstByte: 10 * time.Second, Total: 30 * time.Second, ClientAPITotal: 120 * time.Second, MinRate: 1024}
}

// listFlag is a repeatable flag of comma-separated values.
type listFlag struct{ vals *[]string }

func (l listFlag) String() string { return "" }
func (l listFlag) Set(v string) error {
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			*l.vals = append(*l.vals, e)
		}
	}
	return nil
}

// parseSize reads a byte count: digits, optionally with KiB, MiB or GiB.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suf) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, suf)), m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not a byte count")
	}
	return n * mult, nil
}

// Config is start-up configuration from flags and environment. Settings the
// admin edits at run time live in the database, not here.
type Config struct {
	Addr             string
	DataDir          string
	Demo             bool
	SecretKey        string // SWITCHYARD_SECRET_KEY; empty = <data-dir>/secret.key
	AdminPassword    string // SWITCHYARD_ADMIN_PASSWORD (first password only)
	PrivateUpstreams string // --allow-private-upstreams / SWITCHYARD_PRIVATE_UPSTREAMS
	LogRetentionDays int    // SWITCHYARD_LOG_RETENTION_DAYS
	// PprofAddr is SWITCHYARD_PPROF_ADDR: a loopback host:port where Run
	// serves net/http/pprof for profiling a running gateway; empty = off.
	PprofAddr string
	// DatabaseURL is --database-url / SWITCHYARD_DATABASE_URL: a postgres://
	// URL switches every store to that shared PostgreSQL database, so several
	// replicas serve one fleet. Empty = the embedded SQLite file in DataDir.
	DatabaseURL string
	// RedisURL is --redis-url / SWITCHYARD_REDIS_URL: a redis:// or rediss://
	// server (Redis or Valkey) that makes the live limits fleet-wide —
	// max_concurrent slots, per-key limits, the request queue and the
	// window gate. Needs DatabaseURL. Empty = limits per replica.
	RedisURL string
	// RedisGrantTTLMs is SWITCHYARD_REDIS_GRANT_TTL_MS: how long a slot or
	// concurrency grant lives in Redis without renewal, so a crashed
	// replica's grants lapse within it. Default 30000; range 2000–300000.
	RedisGrantTTLMs int64
	// DatabasePool is SWITCHYARD_DATABASE_POOL: the most pooled connections
	// one replica opens to the shared database (default 10). With the
	// change-feed listener's own connection, a fleet needs replicas ×
	// (DatabasePool + 1) of the server's max_connections.
	DatabasePool int
	// RedisTimeoutMs is SWITCHYARD_REDIS_TIMEOUT_MS: the bound of one Redis
	// call on the request path (default 50 ms). Past it the decision is
	// taken locally; three in a row open the client breaker. Raise it for a
	// Redis across a slow network, never so far that a waiting client
	// notices.
	RedisTimeoutMs int64
	// ReplicaID names this process in the health report and logs of a
	// shared deployment (SWITCHYARD_REPLICA_ID; default host-pid).
	ReplicaID string
	// Getenv is the environment the settings documents read their env
	// overrides from (nil = none).
	Getenv func(string) string
	// Body bounds how long a client may take to send a request body.
	Body BodyTimeouts
	// PublicHosts (--public-host / SWITCHYARD_PUBLIC_HOSTS) are the host
	// names, besides the listen address and loopback names, the dashboard
	// and /api answer to: the names a reverse proxy or DNS points at this
	// gateway. Anything else is refused (DNS rebinding).
	PublicHosts []string
	// Upstream bounds what one upstream answer can make the gateway hold.
	Upstream gateway.BodyLimits
	// Tracing is where OpenTelemetry traces go, from the standard OTEL_*
	// environment (OTEL_EXPORTER_OTLP_ENDPOINT and its kin); the zero value
	// is off.
	Tracing tracing.Config

	egress *services.EgressGuard
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// LoadConfig reads flags (args without the program name) over environment
// defaults and validates the result, reporting every problem at once.
func LoadConfig(args []string, getenv func(string) string) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("switchyard", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flagHosts := cfg.addFlags(fs, getenv)
	knobs := addKnobs(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("flags: %w", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("flags: unexpected argument %q", fs.Arg(0))
	}
	cfg.Getenv = getenv
	cfg.SecretKey = getenv("SWITCHYARD_SECRET_KEY")
	cfg.AdminPassword = getenv("SWITCHYARD_ADMIN_PASSWORD")
	cfg.PprofAddr = getenv("SWITCHYARD_PPROF_ADDR")
	cfg.ReplicaID = getenv("SWITCHYARD_REPLICA_ID")
	if len(*flagHosts) > 0 {
		cfg.PublicHosts = *flagHosts
	}
	env := envNumbers{getenv: getenv}
	env.int64("SWITCHYARD_REDIS_GRANT_TTL_MS", 30_000, 2000, 300_000, "a number of milliseconds", &cfg.RedisGrantTTLMs)
	problems := append(env.problems, cfg.parseKnobs(knobs)...)
	env.problems = nil
	env.int64("SWITCHYARD_REDIS_TIMEOUT_MS", 50, 5, 5000, "a number of milliseconds", &cfg.RedisTimeoutMs)
	env.int("SWITCHYARD_DATABASE_POOL", 10, 2, 500, "a whole number of connections", &cfg.DatabasePool)
	env.int("SWITCHYARD_LOG_RETENTION_DAYS", 7, 1, 3650, "a whole number of days", &cfg.LogRetentionDays)
	problems = append(problems, env.problems...)
	if tc, err := tracing.FromEnv(getenv); err != nil {
		problems = append(problems, err)
	} else {
		cfg.Tracing = tc
	}
	if err := cfg.validate(); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return Config{}, errors.Join(problems...)
	}
	return cfg, nil
}

// addFlags declares the plain flags, each defaulting to its environment
// variable, and returns where the --public-host values land (they replace
// SWITCHYARD_PUBLIC_HOSTS when given).
func (cfg *Config) addFlags(fs *flag.FlagSet, getenv func(string) string) *[]string {
	fs.StringVar(&cfg.Addr, "addr", envOr(getenv, "SWITCHYARD_ADDR", "127.0.0.1:20128"), "listen address (host:port; port 0 picks a free one)")
	fs.StringVar(&cfg.DataDir, "data-dir", envOr(getenv, "SWITCHYARD_DATA_DIR", "./data"), "directory for the database and secret key")
	fs.BoolVar(&cfg.Demo, "demo", false, "start an in-process fake upstream with demo connections, combo and keys")
	fs.StringVar(&cfg.DatabaseURL, "database-url", getenv("SWITCHYARD_DATABASE_URL"), "postgres:// URL of a shared database (default: embedded SQLite in --data-dir)")
	fs.StringVar(&cfg.RedisURL, "redis-url", getenv("SWITCHYARD_REDIS_URL"), "redis:// URL of a Redis or Valkey server for fleet-wide limits (needs --database-url)")
	fs.StringVar(&cfg.PrivateUpstreams, "allow-private-upstreams", getenv("SWITCHYARD_PRIVATE_UPSTREAMS"), "comma-separated host:port or CIDR entries non-local providers may reach although private")
	if v := getenv("SWITCHYARD_PUBLIC_HOSTS"); v != "" {
		_ = listFlag{&cfg.PublicHosts}.Set(v)
	}
	flagHosts := new([]string)
	fs.Var(listFlag{flagHosts}, "public-host", "host name the dashboard and /api answer to besides the listen address and loopback (repeatable, comma-separated)")
	return flagHosts
}

// knob is a flag whose text, defaulting to its environment variable, is
// parsed after the flags: a duration or a byte size with a range.
type knob struct {
	flag, env, def string
	val            *string
}

// Indexes of knobs, in the order parseKnobs reports their problems.
const (
	knobBodyFirstByte = iota
	knobBodyTotal
	knobClientBodyTotal
	knobBodyMinRate
	knobUpstreamEvent
	knobUpstreamBody
	knobUpstreamBudget
)

// addKnobs declares the request-body and upstream-buffer knobs.
func addKnobs(fs *flag.FlagSet, getenv func(string) string) []knob {
	knobs := []knob{
		knobBodyFirstByte:   {"body-first-byte-timeout", "SWITCHYARD_BODY_FIRST_BYTE_TIMEOUT", "10s", nil},
		knobBodyTotal:       {"body-timeout", "SWITCHYARD_BODY_TIMEOUT", "30s", nil},
		knobClientBodyTotal: {"client-body-timeout", "SWITCHYARD_CLIENT_BODY_TIMEOUT", "120s", nil},
		knobBodyMinRate:     {"body-min-rate", "SWITCHYARD_BODY_MIN_RATE", "1024", nil},
		knobUpstreamEvent:   {"upstream-max-event-bytes", "SWITCHYARD_UPSTREAM_MAX_EVENT_BYTES", "4MiB", nil},
		knobUpstreamBody:    {"upstream-max-body-bytes", "SWITCHYARD_UPSTREAM_MAX_BODY_BYTES", "16MiB", nil},
		knobUpstreamBudget:  {"upstream-buffer-budget", "SWITCHYARD_UPSTREAM_BUFFER_BUDGET", "32MiB", nil},
	}
	for i := range knobs {
		k := &knobs[i]
		k.val = fs.String(k.flag, envOr(getenv, k.env, k.def), k.env)
	}
	return knobs
}

// parseKnobs reads the knobs into cfg.Body and cfg.Upstream.
func (cfg *Config) parseKnobs(knobs []knob) []error {
	var problems []error
	durationKnob := func(k knob, min, max time.Duration, dst *time.Duration) {
		d, err := time.ParseDuration(strings.TrimSpace(*k.val))
		if err != nil || d < min || d > max {
			problems = append(problems, fmt.Errorf("--%s (%s): %q is not a duration from %v to %v (for example 10s)", k.flag, k.env, *k.val, min, max))
			return
		}
		*dst = d
	}
	sizeKnob := func(k knob, min, max int64, dst *int64) {
		n, err := parseSize(*k.val)
		if err != nil || n < min || n > max {
			problems = append(problems, fmt.Errorf("--%s (%s): %q is not a byte count from %d to %d (for example 4MiB)", k.flag, k.env, *k.val, min, max))
			return
		}
		*dst = n
	}
	durationKnob(knobs[knobBodyFirstByte], time.Second, time.Hour, &cfg.Body.FirstByte)
	durationKnob(knobs[knobBodyTotal], time.Second, time.Hour, &cfg.Body.Total)
	durationKnob(knobs[knobClientBodyTotal], time.Second, time.Hour, &cfg.Body.ClientAPITotal)
	sizeKnob(knobs[knobBodyMinRate], 0, 1<<30, &cfg.Body.MinRate)
	var event int64
	sizeKnob(knobs[knobUpstreamEvent], 64<<10, 256<<20, &event)
	cfg.Upstream.MaxEventBytes = int(event)
	sizeKnob(knobs[knobUpstreamBody], 1<<20, 1<<30, &cfg.Upstream.MaxBodyBytes)
	sizeKnob(knobs[knobUpstreamBudget], 1<<20, 16<<30, &cfg.Upstream.BudgetBytes)
	return problems
}

// envNumbers reads whole numbers with a range from the environment,
// collecting a problem for each that is set but out of range.
type envNumbers struct {
	getenv   func(string) string
	problems []error
}

// int64 sets *dst from key, or to def when key is unset; what names the
// unit in the problem ("a number of milliseconds").
func (e *envNumbers) int64(key string, def, min, max int64, what string, dst *int64) {
	*dst = def
	v := e.getenv(key)
	if v == "" {
		return
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		e.problems = append(e.problems, fmt.Errorf("%s: %q is not %s from %d to %d", key, v, what, min, max))
		return
	}
	*dst = n
}

// int is int64 for an int field.
func (e *envNumbers) int(key string, def, min, max int, what string, dst *int) {
	n := int64(def)
	e.int64(key, int64(def), int64(min), int64(max), what, &n)
	*dst = int(n)
}

func (c *Config) validate() error {
	var problems []error
	if host, port, err := net.SplitHostPort(c.Addr); err != nil {
		problems = append(problems, fmt.Errorf("--addr: %q is not host:port", c.Addr))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		problems = append(problems, fmt.Errorf("--addr: port %q is not a number from 0 to 65535", port))
	} else if host == "" {
		problems = append(problems, errors.New("--addr: name the host (for example 127.0.0.1:20128, or 0.0.0.0:20128 to listen on every interface)"))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		problems = append(problems, errors.New("--data-dir: must not be empty"))
	}
	if c.SecretKey != "" && len(c.SecretKey) < 32 {
		problems = append(problems, errors.New("SWITCHYARD_SECRET_KEY: use at least 32 characters (for example: openssl rand -base64 32)"))
	}
	if c.AdminPassword != "" {
		if n := utf8.RuneCountInString(c.AdminPassword); n < services.PasswordMinLen {
			problems = append(problems, fmt.Errorf("SWITCHYARD_ADMIN_PASSWORD: %s", services.MsgPasswordShort))
		} else if n > services.PasswordMaxLen {
			problems = append(problems, fmt.Errorf("SWITCHYARD_ADMIN_PASSWORD: %s", services.MsgPasswordLong))
		}
	}
	if c.PprofAddr != "" {
		host, port, err := net.SplitHostPort(c.PprofAddr)
		ip := net.ParseIP(host)
		if _, perr := strconv.Atoi(port); err != nil || perr != nil || !(host == "localhost" || (ip != nil && ip.IsLoopback())) {
			problems = append(problems, errors.New("SWITCHYARD_PPROF_ADDR: use a loopback host:port such as 127.0.0.1:6060 (profiles reveal internals; never expose them)"))
		}
	}
	problems = append(problems, c.validateShared()...)
	if c.Body != (BodyTimeouts{}) {
		if c.Body.FirstByte > c.Body.Total || c.Body.FirstByte > c.Body.ClientAPITotal {
			problems = append(problems, errors.New("--body-first-byte-timeout: must not exceed --body-timeout or --client-body-timeout"))
		}
	}
	if u := c.Upstream; u.BudgetBytes > 0 && (u.BudgetBytes < int64(u.MaxEventBytes) || u.BudgetBytes < u.MaxBodyBytes) {
		problems = append(problems, errors.New("--upstream-buffer-budget: must be at least --upstream-max-event-bytes and --upstream-max-body-bytes, or no answer that large could ever be read"))
	}
	for i, h := range c.PublicHosts {
		norm, err := normalizePublicHost(h)
		if err != nil {
			problems = append(problems, fmt.Errorf("--public-host (SWITCHYARD_PUBLIC_HOSTS): %q %v", h, err))
			continue
		}
		c.PublicHosts[i] = norm
	}
	g, err := services.ParseEgressAllowlist(c.PrivateUpstreams)
	if err != nil {
		problems = append(problems, fmt.Errorf("--allow-private-upstreams: %w", err))
	}
	c.egress = g
	return errors.Join(problems...)
}

// Shared reports whether the stores are a shared database (several replicas).
func (c Config) Shared() bool { return c.DatabaseURL != "" }

// validateShared checks the shared-database configuration. Every message
// names the variable, so a typo in a deployment manifest is found at once.
func (c *Config) validateShared() []error {
	var problems []error
	if c.RedisURL != "" {
		u, err := url.Parse(c.RedisURL)
		switch {
		case err != nil:
			problems = append(problems, fmt.Errorf("SWITCHYARD_REDIS_URL (--redis-url): not a URL: %v", redactURLError(err)))
		case u.Scheme != "redis" && u.Scheme != "rediss":
			problems = append(problems, fmt.Errorf("SWITCHYARD_REDIS_URL (--redis-url): unknown scheme %q; use redis://host:6379/0 or rediss:// (Redis or Valkey)", u.Scheme))
		case u.Host == "":
			problems = append(problems, errors.New("SWITCHYARD_REDIS_URL (--redis-url): name the server, e.g. redis://cache.internal:6379/0"))
		}
		if c.DatabaseURL == "" {
			problems = append(problems, errors.New("SWITCHYARD_REDIS_URL (--redis-url): needs SWITCHYARD_DATABASE_URL: Redis shares the limits of several replicas, which must share one PostgreSQL database (SQLite cannot be shared)"))
		}
	}
	if c.DatabaseURL == "" {
		return problems
	}
	u, err := url.Parse(c.DatabaseURL)
	switch {
	case err != nil:
		problems = append(problems, fmt.Errorf("SWITCHYARD_DATABASE_URL (--database-url): not a URL: %v", redactURLError(err)))
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		problems = append(problems, fmt.Errorf("SWITCHYARD_DATABASE_URL (--database-url): unknown scheme %q; use postgres://user:password@host:5432/dbname", u.Scheme))
	case u.Host == "" && u.Query().Get("host") == "":
		problems = append(problems, errors.New("SWITCHYARD_DATABASE_URL (--database-url): name the server, e.g. postgres://user:password@db.internal:5432/switchyard"))
	}
	if c.SecretKey == "" {
		problems = append(problems, errors.New("SWITCHYARD_SECRET_KEY: required with SWITCHYARD_DATABASE_URL: every replica must seal and open credentials and sessions with the same key (a per-data-dir secret.key would differ)"))
	}
	if c.Demo {
		problems = append(problems, errors.New("--demo: not with SWITCHYARD_DATABASE_URL: the demo replaces its keys at every start, which would revoke the keys other replicas printed"))
	}
	return problems
}

// redactURLError keeps a URL parse error from echoing the URL, which may
// carry the database password.
func redactURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return "malformed"
}
