// Package resilience holds the state machines that decide whether, where and
// when Switchyard sends a request upstream after something went wrong
// (20-resilience.md): the error classification pipeline, the provider circuit
// breaker, the provider cooldown window gate, connection cooldowns and
// terminal states, model lockouts and the egress-group lock. Every component
// takes an injected clock, keeps hot-path state in memory and persists what
// must survive a restart through a store interface (memory + SQLite now,
// shared stores later).
package resilience

import (
	"net/http"
	"time"

	"switchyard/services"
)

// Profile is the auth class whose defaults apply (oauth, apikey, local).
type Profile = services.AuthClass

// Reason is the closed vocabulary of failure reasons (20-resilience §1.4).
type Reason string

const (
	ReasonRateLimit        Reason = "rate_limit"
	ReasonQuotaExhausted   Reason = "quota_exhausted"
	ReasonCreditsExhausted Reason = "credits_exhausted"
	ReasonAuthError        Reason = "auth_error"
	ReasonForbidden        Reason = "forbidden"
	ReasonNotFound         Reason = "not_found"
	ReasonModelCapacity    Reason = "model_capacity"
	ReasonServerError      Reason = "server_error"
	ReasonTransient        Reason = "transient"
	ReasonRequestRejected  Reason = "request_rejected"
	ReasonCallerError      Reason = "caller_error"
	ReasonClientAbort      Reason = "client_abort"
	ReasonLocalLimit       Reason = "local_limit"
)

// Scope says what a failure penalises.
type Scope string

const (
	ScopeNone       Scope = "none"
	ScopeConnection Scope = "connection"
	ScopeModel      Scope = "model"
	ScopeProvider   Scope = "provider"
)

// LockShape is the key shape of a model lockout (20-resilience §7).
type LockShape string

const (
	ShapeFamily LockShape = "family"
	ShapeBase   LockShape = "base"
	ShapeExact  LockShape = "exact"
)

// Failover says where the attempt loop goes next.
type Failover string

const (
	FailoverNext      Failover = "next"       // next connection of the target, then the next target
	FailoverNextModel Failover = "next_model" // skip targets with the same model
	FailoverStop      Failover = "stop"
)

// Phase says whether anything reached the client yet.
type Phase string

const (
	PhasePreCommit  Phase = "pre_commit"
	PhasePostCommit Phase = "post_commit"
)

// Terminal statuses.
const (
	TerminalBanned           = services.TerminalBanned
	TerminalExpired          = services.TerminalExpired
	TerminalCreditsExhausted = services.TerminalCreditsExhausted
)

// Transport failure kinds (status 0).
const (
	TransportDial           = "dial"
	TransportTLS            = "tls"
	TransportProxy          = "proxy"
	TransportReset          = "reset"
	TransportHeadersTimeout = "headers_timeout"
	TransportIdleTimeout    = "idle_timeout"
)

// Failure is one failed attempt as the classifier sees it (20-resilience §1 Input).
type Failure struct {
	Provider      string // canonical provider id
	ProviderClass Profile
	// PerModelQuota: the provider is flagged perModelQuota or passthroughModels.
	PerModelQuota bool
	// Custom: a custom openai-/anthropic-compatible node (new-api family).
	Custom       bool
	ConnectionID string
	Model        string
	Status       int         // 0 for transport failures
	Transport    string      // Transport* when Status == 0
	Header       http.Header // upstream response headers (may be nil)
	Body         []byte      // at most 64 KiB
	Code         string      // parsed error code of the OpenAI/Anthropic/Gemini envelope
	Type         string      // parsed error type
	Message      string      // parsed error message
	Detail       string      // e.g. "empty_response" for a synthetic 502
	Phase        Phase
	ToolCount    int
	ClientAbort  bool  // the client's context ended
	LocalErr     error // a Switchyard limiter error (typed), recognised with errors.As
	At           time.Time
}

// Classification is the decision for one failure (20-resilience §1).
type Classification struct {
	Status     int    // after restatement
	Restated   string // restatement entry id, "" when none
	RuleID     string // matching error rule id, "" when the classifier decided
	Reason     Reason
	Detail     string // retired_model, context_length, tool_limit, daily_quota, malformed, payload_too_large, empty_response …
	Scope      Scope
	LockScope  LockShape // rule lockScope or natural shape for model scope
	ScopeFixed bool      // a rule fixed the scope (no lockout override)
	CooldownMs int64     // rule cooldownMs (replaces the base), 0 when none
	Ban        bool      // rule ban: true
	Terminal   string    // "", banned, expired (never from the classifier directly), credits_exhausted
	Breaker    bool      // counts toward the provider breaker
	Failover   Failover
	// Hint is the upstream retry hint (floored at 1 s, capped), 0 when none.
	Hint       time.Duration
	HintSource string // header, body_json, body_text
	// ClientRetryAfter is the Retry-After the client gets if this becomes the
	// final answer (restatement default), 0 when not set.
	ClientRetryAfter time.Duration
	// ToolLimit is the learned tool limit (detail tool_limit), 0 when unknown.
	ToolLimit int
}
