package app

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"

	"switchyard/services/tracing"
)

// startTracing builds the OpenTelemetry trace pipeline when the
// environment names an OTLP endpoint (Config.Tracing); off otherwise, and
// then nothing of it exists. The start-up log says where spans go, without
// the credentials (headers, user info).
func (s *Server) startTracing(ctx context.Context) error {
	if !s.cfg.Tracing.Enabled() {
		return nil
	}
	p, err := tracing.Start(ctx, s.cfg.Tracing, Version, s.cfg.ReplicaID)
	if err != nil {
		return err
	}
	s.tracing = p
	log := s.log.With("component", "tracing")
	// Export failures (collector down, refused) are the SDK's to report;
	// they go to this log instead of stderr. The handler is process-wide.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: export failed", "err", err) }))
	log.Info("tracing on: exporting OpenTelemetry traces over OTLP/HTTP", "endpoint", p.Where(),
		"service", s.cfg.Tracing.ServiceName, "headers", len(s.cfg.Tracing.Headers))
	return nil
}

// stopTracing flushes the spans still buffered and stops the exporter,
// bounded so an unreachable collector cannot hold up shutdown.
func (s *Server) stopTracing() {
	if s.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.tracing.Shutdown(ctx); err != nil {
		s.log.Warn("tracing: spans not exported at shutdown", "err", err)
	}
}
