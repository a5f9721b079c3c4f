// Package tracing exports OpenTelemetry traces of the gateway over
// OTLP/HTTP. It is off unless the standard OpenTelemetry environment names
// an OTLP endpoint; then the app builds a Provider at start and shuts it
// down (flushing what is buffered) when the server closes.
//
// The configuration is read through an injected getenv, so the app reads
// its environment once (app.LoadConfig) and tests pass theirs explicitly.
// The variables read here are the ones that decide whether and where spans
// go; the exporter itself still reads the rest of the OTLP environment
// (certificates, compression, timeout) from the process, as the SDK does.
package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// The environment variables of the OpenTelemetry specification this
// package reads.
const (
	EnvEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint   = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvHeaders          = "OTEL_EXPORTER_OTLP_HEADERS"
	EnvTracesHeaders    = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	EnvProtocol         = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol   = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName      = "OTEL_SERVICE_NAME"
	EnvResourceAttrs    = "OTEL_RESOURCE_ATTRIBUTES"
	EnvSDKDisabled      = "OTEL_SDK_DISABLED"
	EnvTracesExporter   = "OTEL_TRACES_EXPORTER"
	defaultServiceName  = "switchyard"
	defaultTracesPath   = "/v1/traces"
	protocolProtobuf    = "http/protobuf"
	protocolJSON        = "http/json"
	protocolUnsupported = "grpc"
)

// Config is where traces go. The zero Config is tracing off.
type Config struct {
	// URL is the OTLP/HTTP traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// as given, or OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended.
	// Empty = off.
	URL string
	// Headers are sent with every export (OTEL_EXPORTER_OTLP_TRACES_HEADERS,
	// else OTEL_EXPORTER_OTLP_HEADERS): typically the collector's
	// credentials, so they are never logged or shown.
	Headers map[string]string
	// JSON selects the http/json encoding instead of http/protobuf.
	JSON bool
	// ServiceName is OTEL_SERVICE_NAME (default "switchyard").
	ServiceName string
	// Resource holds OTEL_RESOURCE_ATTRIBUTES (key=value,...).
	Resource map[string]string
}

// Enabled reports whether spans are exported.
func (c Config) Enabled() bool { return c.URL != "" }

// Where is the traces URL without user info, query or fragment: what a log
// line or the health report may show. Credentials travel in Headers (or
// in the URL's user info) and are left out.
func (c Config) Where() string {
	if c.URL == "" {
		return ""
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// FromEnv reads the tracing configuration from getenv. Tracing is off when
// no OTLP endpoint is set, when OTEL_SDK_DISABLED is true or when
// OTEL_TRACES_EXPORTER is none. A setting Switchyard cannot honour (gRPC,
// another exporter, a malformed URL) is an error, so a misconfigured
// collector is noticed at start rather than by missing traces.
func FromEnv(getenv func(string) string) (Config, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return Config{}, nil
	}
	switch exp := strings.TrimSpace(getenv(EnvTracesExporter)); exp {
	case "", "otlp":
	case "none":
		return Config{}, nil
	default:
		return Config{}, fmt.Errorf("%s: %q is not supported (Switchyard exports otlp or none)", EnvTracesExporter, exp)
	}
	var cfg Config
	var problems []error
	if v := strings.TrimSpace(getenv(EnvTracesEndpoint)); v != "" {
		u, err := parseEndpoint(EnvTracesEndpoint, v)
		if err != nil {
			problems = append(problems, err)
		} else {
			// A per-signal URL is used as is; only an empty path becomes /.
			if u.Path == "" {
				u.Path = "/"
			}
			cfg.URL = u.String()
		}
	} else if v := strings.TrimSpace(getenv(EnvEndpoint)); v != "" {
		u, err := parseEndpoint(EnvEndpoint, v)
		if err != nil {
			problems = append(problems, err)
		} else {
			// The general URL is a base the signal paths are relative to.
			u.Path = path.Join("/", u.Path, defaultTracesPath)
			cfg.URL = u.String()
		}
	}
	if cfg.URL == "" && len(problems) == 0 {
		return Config{}, nil
	}
	proto, key := strings.TrimSpace(getenv(EnvTracesProtocol)), EnvTracesProtocol
	if proto == "" {
		proto, key = strings.TrimSpace(getenv(EnvProtocol)), EnvProtocol
	}
	switch proto {
	case "", protocolProtobuf:
	case protocolJSON:
		cfg.JSON = true
	case protocolUnsupported:
		problems = append(problems, fmt.Errorf("%s: grpc is not supported: Switchyard exports OTLP over HTTP (http/protobuf or http/json; the collector's port 4318)", key))
	default:
		problems = append(problems, fmt.Errorf("%s: %q is not an OTLP protocol (http/protobuf or http/json)", key, proto))
	}
	h := getenv(EnvTracesHeaders)
	if strings.TrimSpace(h) == "" {
		h = getenv(EnvHeaders)
	}
	headers, err := parsePairs(h)
	if err != nil {
		// The value is a credential: the error names the variable only.
		problems = append(problems, fmt.Errorf("OTLP headers: %w", err))
	}
	cfg.Headers = headers
	cfg.ServiceName = strings.TrimSpace(getenv(EnvServiceName))
	if cfg.ServiceName == "" {
		cfg.ServiceName = defaultServiceName
	}
	res, err := parsePairs(getenv(EnvResourceAttrs))
	if err != nil {
		problems = append(problems, fmt.Errorf("%s: %w", EnvResourceAttrs, err))
	}
	cfg.Resource = res
	if err := errors.Join(problems...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// parseEndpoint accepts an http:// or https:// URL with a host. The error
// names the variable, never the value (it may carry credentials).
func parseEndpoint(key, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: not an http:// or https:// URL with a host (for example http://127.0.0.1:4318)", key)
	}
	return u, nil
}

// parsePairs reads the key=value,key=value lists of the OpenTelemetry
// environment; values are percent-decoded. nil for an empty list.
func parsePairs(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("entry %d is not key=value", i+1)
		}
		dv, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("entry %d (%s): the value is not percent-encoded correctly", i+1, k)
		}
		out[k] = strings.TrimSpace(dv)
	}
	return out, nil
}
