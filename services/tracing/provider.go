package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Provider is the running trace pipeline: the SDK tracer provider, its
// batching span processor and the OTLP/HTTP exporter. A nil *Provider is
// tracing off; every method is safe on it.
//
// It is never installed as the OpenTelemetry global: the gateway is given
// it explicitly, so nothing else in the process (libraries that trace
// through the global) starts exporting because Switchyard does.
type Provider struct {
	tp    *sdktrace.TracerProvider
	where string
}

// Start builds the pipeline of cfg; nil, nil when cfg is off. Nothing is
// sent until the first batch: an unreachable collector does not stop the
// server, its export errors go to the OpenTelemetry error handler.
// version and instance become service.version and service.instance.id.
func Start(ctx context.Context, cfg Config, version, instance string) (*Provider, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(cfg.URL)}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	if cfg.JSON {
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, errors.New("tracing: cannot build the OTLP/HTTP exporter for " + cfg.Where() + ": " + err.Error())
	}
	attrs := make([]attribute.KeyValue, 0, len(cfg.Resource)+3)
	for k, v := range cfg.Resource {
		attrs = append(attrs, attribute.String(k, v))
	}
	// The explicit settings win over OTEL_RESOURCE_ATTRIBUTES.
	attrs = append(attrs, attribute.String("service.name", cfg.ServiceName))
	if version != "" {
		attrs = append(attrs, attribute.String("service.version", version))
	}
	if instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", instance))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		res = resource.NewSchemaless(attrs...)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{tp: tp, where: cfg.Where()}, nil
}

// TracerProvider is what the gateway starts its spans from; nil when off
// (a nil interface, not a typed nil).
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.tp
}

// Where is the traces URL without credentials ("" when off).
func (p *Provider) Where() string {
	if p == nil {
		return ""
	}
	return p.where
}

// Shutdown flushes what is buffered and stops the exporter; spans ended
// after it are dropped. Bounded by ctx.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}
