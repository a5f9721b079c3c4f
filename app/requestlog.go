package app

import (
	"context"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/requestlog"
	"switchyard/services/resilience"
	"switchyard/services/stats"
)

// logSink turns the gateway's per-request record into a request-log entry,
// priced from the model price table, and hands it to the batch writer,
// which never blocks the proxy path.
type logSink struct {
	w      *requestlog.Writer
	prices *services.Prices
}

// countingSink counts each batch into the in-memory traffic buckets, then
// stores it: the buckets cost the request path nothing and hold the same
// requests as the log.
type countingSink struct {
	stats *stats.Recorder
	next  services.RequestLogSink
}

func (c countingSink) WriteRequestLogs(ctx context.Context, entries []services.RequestLogEntry) error {
	c.stats.Record(entries)
	return c.next.WriteRequestLogs(ctx, entries)
}

var _ gateway.LogSink = logSink{}

func (l logSink) Record(r *gateway.LogRecord) {
	e := services.RequestLogEntry{
		ID: r.ID, CreatedAt: r.CreatedAt, ClientRequestID: r.ClientRequestID, APIKeyID: r.KeyID, APIKeyName: r.KeyName,
		APIKeyPrefix: r.KeyPrefix, Method: "POST", Endpoint: r.Endpoint, InboundFormat: r.Inbound, Stream: r.Stream,
		StreamOutcome: r.StreamOutcome, RequestedModel: r.RequestedModel, ResolvedKind: r.ResolvedKind, ComboName: r.ComboName,
		ComboPath: r.ComboName, Strategy: r.Strategy, Provider: r.Provider, Model: r.Model, ConnectionID: r.ConnectionID,
		Status: r.Status, Outcome: r.Outcome, ErrorCode: r.ErrorCode, Attempts: r.Attempts,
		PromptTokens: r.PromptTokens, CachedTokens: r.CachedTokens, CompletionTokens: r.CompletionTok, ReasoningTokens: r.ReasoningTokens,
		LatencyMs: r.LatencyMs, TtftMs: r.TtftMs, UpstreamLatencyMs: r.UpstreamMs, Warnings: append([]string{}, r.Warnings...),
		AffinityHit: r.AffinityHit, LeaseManaged: r.LeaseManaged, EmergencyFallback: r.EmergencyFallback,
	}
	e.UpstreamFormat = r.UpstreamFormat
	e.CacheWriteTokens = r.CacheWriteTokens
	e.EstimatedCost = l.prices.Estimate(r.Provider, r.Model, r.PromptTokens, r.CompletionTok)
	if e.Outcome == "" {
		e.Outcome = "client_error"
		if e.Status >= 500 {
			e.Outcome = "upstream_error"
		}
	}
	e.AttemptLog = make([]services.AttemptRecord, len(r.AttemptLog))
	for i, a := range r.AttemptLog {
		e.AttemptLog[i] = services.AttemptRecord{Seq: a.Seq, TargetID: a.TargetID, Provider: a.Provider, Model: a.Model,
			ConnectionID: a.ConnectionID, Outcome: a.Outcome, Detail: a.Detail, UpstreamStatus: a.UpstreamStatus,
			ErrorCode: a.ErrorCode, RetryHintSource: a.HintSource, LatencyMs: a.LatencyMs, StartOffsetMs: a.StartOffset.Milliseconds(),
			HintMs: a.HintMs, Effects: attemptEffects(a.Effects)}
	}
	// Never nil: a nil Waits marks the rows written before the timeline was.
	e.Waits = append([]services.WaitRecord{}, r.Waits...)
	e.Skips = append([]services.SkipRecord{}, r.Skips...)
	l.w.Add(e)
}

// attemptEffects converts the state changes of a failed attempt; nil when
// it applied none (every successful attempt).
func attemptEffects(in []resilience.Effect) []services.AttemptEffect {
	if len(in) == 0 {
		return nil
	}
	out := make([]services.AttemptEffect, len(in))
	for i, f := range in {
		out[i] = services.AttemptEffect{Kind: f.Kind, LockKey: f.LockKey, TerminalStatus: f.TerminalStatus}
		if !f.Until.IsZero() {
			out[i].UntilMs = f.Until.UnixMilli()
		}
	}
	return out
}
