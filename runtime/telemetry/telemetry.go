package telemetry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/kind"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Option adjusts [TracerProvider] beyond what the environment says.
type Option func(*options)

type options struct {
	console io.Writer
}

// WithConsoleWriter sends the console exporter's JSON to w instead of
// standard error, so that tests and embedders can capture it.
func WithConsoleWriter(w io.Writer) Option {
	return func(o *options) { o.console = w }
}

// exporterNames lists the OTEL_TRACES_EXPORTER values that are built, for
// the error that rejects any other.
const exporterNames = "otlp, console, none"

// defaultOTLPEndpoint is the specification's default for OTLP over HTTP.
const defaultOTLPEndpoint = "http://localhost:4318"

// TracerProvider builds the tracer provider the OTEL_* environment asks for,
// read through lookupEnv (os.LookupEnv in a service). serviceName and
// serviceVersion are the resource's service.name and service.version unless
// the environment names them: OTEL_SERVICE_NAME wins over a service.name in
// OTEL_RESOURCE_ATTRIBUTES, which wins over serviceName.
//
// Tracing is off, and a no-op provider with a no-op shutdown is returned,
// when OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none, or neither an
// exporter nor an OTLP endpoint is set, so a service costs nothing to trace
// until an operator asks. Otherwise spans go through a batch span processor
// to each exporter named, and shutdown flushes them; call it before the
// process exits or the last batch is lost.
//
// A value that cannot be used is an error, an *[EnvError] naming the
// variable or a *[kind.DeferredError] for what is not built (OTLP over
// gRPC, the Jaeger-remote and X-Ray samplers); the provider is never
// half-configured.
func TracerProvider(ctx context.Context, lookupEnv func(string) (string, bool), serviceName, serviceVersion string, opts ...Option) (trace.TracerProvider, func(context.Context) error, error) {
	o := options{console: os.Stderr}
	for _, opt := range opts {
		opt(&o)
	}
	e := env(lookupEnv)
	off := func() (trace.TracerProvider, func(context.Context) error, error) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}

	switch v := e.get("OTEL_SDK_DISABLED"); strings.ToLower(v) {
	case "true":
		return off()
	case "", "false":
	default:
		return nil, nil, &EnvError{Name: "OTEL_SDK_DISABLED", Reason: fmt.Sprintf("%q is neither true nor false", v)}
	}
	exporters, err := parseExporters(e)
	if err != nil {
		return nil, nil, err
	}
	if len(exporters) == 0 {
		return off()
	}

	sampler, err := parseSampler(e.get("OTEL_TRACES_SAMPLER"), e.get("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, nil, err
	}
	res, err := buildResource(ctx, e, serviceName, serviceVersion)
	if err != nil {
		return nil, nil, err
	}
	batch, err := batchOptions(e)
	if err != nil {
		return nil, nil, err
	}
	var otlpOpts []otlptracehttp.Option
	if slices.Contains(exporters, "otlp") {
		if otlpOpts, err = otlpOptions(e); err != nil {
			return nil, nil, err
		}
	}

	var started []sdktrace.SpanExporter
	stopStarted := func() {
		for _, exp := range started {
			_ = exp.Shutdown(ctx)
		}
	}
	for _, name := range exporters {
		var exp sdktrace.SpanExporter
		switch name {
		case "otlp":
			exp, err = otlptracehttp.New(ctx, otlpOpts...)
		case "console":
			exp, err = stdouttrace.New(stdouttrace.WithWriter(o.console))
		}
		if err != nil {
			stopStarted()
			return nil, nil, fmt.Errorf("starting the %s trace exporter: %w", name, err)
		}
		started = append(started, exp)
	}

	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSampler(sampler)}
	for _, exp := range started {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp, batch...))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	shutdown := func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("flushing and stopping the tracer provider: %w", err)
		}
		return nil
	}
	return tp, shutdown, nil
}

// parseExporters returns the exporters OTEL_TRACES_EXPORTER names, in order
// and without repeats; none when tracing is off. Unset, it means "otlp" when
// an OTLP endpoint is set and nothing otherwise, so that setting only an
// endpoint, the common way to point a service at a collector, turns export
// on.
func parseExporters(e env) ([]string, error) {
	const name = "OTEL_TRACES_EXPORTER"
	v := e.get(name)
	if v == "" {
		if e.get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && e.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
		return []string{"otlp"}, nil
	}
	var out []string
	none := false
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		switch part {
		case "":
			continue
		case "none":
			none = true
		case "otlp", "console":
			if !slices.Contains(out, part) {
				out = append(out, part)
			}
		default:
			return nil, &EnvError{Name: name, Reason: fmt.Sprintf("unknown exporter %q (supported: %s)", part, exporterNames)}
		}
	}
	if none && len(out) > 0 {
		return nil, &EnvError{Name: name, Reason: fmt.Sprintf("%q names none together with other exporters", v)}
	}
	return out, nil
}

// buildResource describes the service: the SDK's own attributes, then
// serviceName and serviceVersion, then OTEL_RESOURCE_ATTRIBUTES, then
// OTEL_SERVICE_NAME, a later value of a key replacing an earlier one.
func buildResource(ctx context.Context, e env, serviceName, serviceVersion string) (*resource.Resource, error) {
	fromEnv, err := parseResourceAttributes(e.get("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(serviceName)}
	if serviceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(serviceVersion))
	}
	attrs = append(attrs, fromEnv...)
	if v := e.get("OTEL_SERVICE_NAME"); v != "" {
		attrs = append(attrs, semconv.ServiceName(v))
	}
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attrs...),
	)
	if err != nil {
		return nil, fmt.Errorf("building the trace resource: %w", err)
	}
	return res, nil
}

// batchOptions reads the OTEL_BSP_* variables. They are passed explicitly,
// falling back to the SDK's defaults, so that the processor follows
// lookupEnv rather than the process environment the SDK would read.
func batchOptions(e env) ([]sdktrace.BatchSpanProcessorOption, error) {
	delay, err := parseNonNegativeInt("OTEL_BSP_SCHEDULE_DELAY", e.get("OTEL_BSP_SCHEDULE_DELAY"), sdktrace.DefaultScheduleDelay)
	if err != nil {
		return nil, err
	}
	timeout, err := parseNonNegativeInt("OTEL_BSP_EXPORT_TIMEOUT", e.get("OTEL_BSP_EXPORT_TIMEOUT"), sdktrace.DefaultExportTimeout)
	if err != nil {
		return nil, err
	}
	queue, err := parseNonNegativeInt("OTEL_BSP_MAX_QUEUE_SIZE", e.get("OTEL_BSP_MAX_QUEUE_SIZE"), sdktrace.DefaultMaxQueueSize)
	if err != nil {
		return nil, err
	}
	size, err := parseNonNegativeInt("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", e.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"), sdktrace.DefaultMaxExportBatchSize)
	if err != nil {
		return nil, err
	}
	if queue == 0 {
		return nil, &EnvError{Name: "OTEL_BSP_MAX_QUEUE_SIZE", Reason: "0 would drop every span; use OTEL_TRACES_EXPORTER=none to turn tracing off"}
	}
	if size == 0 {
		return nil, &EnvError{Name: "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", Reason: "0 would export nothing; use OTEL_TRACES_EXPORTER=none to turn tracing off"}
	}
	return []sdktrace.BatchSpanProcessorOption{
		sdktrace.WithBatchTimeout(time.Duration(delay) * time.Millisecond),
		sdktrace.WithExportTimeout(time.Duration(timeout) * time.Millisecond),
		sdktrace.WithMaxQueueSize(queue),
		sdktrace.WithMaxExportBatchSize(size),
	}, nil
}

// otlpOptions reads the OTEL_EXPORTER_OTLP_* variables into exporter
// options. Every setting is passed explicitly, even when unset (no headers,
// no TLS configuration), because the exporter otherwise reads the same
// variables from the process environment and would mix them with lookupEnv.
func otlpOptions(e env) ([]otlptracehttp.Option, error) {
	var opts []otlptracehttp.Option

	protocol, protocolName := e.signal("PROTOCOL")
	switch protocol {
	case "", "http/protobuf":
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf))
	case "http/json":
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
	case "grpc":
		return nil, fmt.Errorf("%s: %w", protocolName, deferred("OTLP over gRPC (use http/protobuf, which collectors accept on port 4318)"))
	default:
		return nil, &EnvError{Name: protocolName, Reason: fmt.Sprintf("unknown protocol %q (supported: http/protobuf, http/json)", protocol)}
	}

	endpoint, err := otlpEndpoint(e)
	if err != nil {
		return nil, err
	}
	opts = append(opts, otlptracehttp.WithEndpointURL(endpoint.String()))

	rawHeaders, headersName := e.signal("HEADERS")
	headers, err := parseHeaders(headersName, rawHeaders)
	if err != nil {
		return nil, err
	}
	opts = append(opts, otlptracehttp.WithHeaders(headers))

	rawTimeout, timeoutName := e.signal("TIMEOUT")
	timeout, err := parseNonNegativeInt(timeoutName, rawTimeout, 10000)
	if err != nil {
		return nil, err
	}
	opts = append(opts, otlptracehttp.WithTimeout(time.Duration(timeout)*time.Millisecond))

	compression, compressionName := e.signal("COMPRESSION")
	switch compression {
	case "", "none":
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.NoCompression))
	case "gzip":
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	default:
		return nil, &EnvError{Name: compressionName, Reason: fmt.Sprintf("unknown compression %q (supported: gzip, none)", compression)}
	}

	tlsCfg, err := otlpTLS(e)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil && endpoint.Scheme != "https" {
		return nil, &EnvError{Name: "OTEL_EXPORTER_OTLP_CERTIFICATE", Reason: fmt.Sprintf("certificates are set but the endpoint %s is not https", endpoint.Redacted())}
	}
	opts = append(opts, otlptracehttp.WithTLSClientConfig(tlsCfg))
	return opts, nil
}

// otlpEndpoint returns the URL spans are posted to. The traces-specific
// variable is used as it is; the general one is a base to which the signal
// path /v1/traces is appended, as the OTLP specification says.
func otlpEndpoint(e env) (*url.URL, error) {
	name := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	raw := e.get(name)
	appendPath := false
	if raw == "" {
		name, raw, appendPath = "OTEL_EXPORTER_OTLP_ENDPOINT", e.get("OTEL_EXPORTER_OTLP_ENDPOINT"), true
		if raw == "" {
			raw = defaultOTLPEndpoint
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The parse error quotes the URL, which may hold credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &EnvError{Name: name, Reason: fmt.Sprintf("not a URL: %v", err)}
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, &EnvError{Name: name, Reason: fmt.Sprintf("%s is not an http:// or https:// URL with a host", u.Redacted())}
	}
	if u.User != nil {
		// The exporter would drop them silently and the collector refuse
		// every batch.
		return nil, &EnvError{Name: name, Reason: "credentials in the URL are not sent; put them in OTEL_EXPORTER_OTLP_HEADERS"}
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, &EnvError{Name: name, Reason: fmt.Sprintf("%s has a query or fragment, which OTLP/HTTP does not use", u.Redacted())}
	}
	if appendPath {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		u.RawPath = ""
	}
	return u, nil
}

// otlpTLS builds the TLS configuration from the certificate variables, or
// returns nil when none is set.
func otlpTLS(e env) (*tls.Config, error) {
	caFile, caName := e.signal("CERTIFICATE")
	certFile, certName := e.signal("CLIENT_CERTIFICATE")
	keyFile, keyName := e.signal("CLIENT_KEY")
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, &EnvError{Name: caName, Reason: fmt.Sprintf("reading the CA certificate: %v", err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &EnvError{Name: caName, Reason: fmt.Sprintf("%s holds no PEM certificate", caFile)}
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			// The error names files and formats, never key material.
			return nil, &EnvError{Name: certName, Reason: fmt.Sprintf("loading the client certificate and %s: %v", keyName, err)}
		}
		cfg.Certificates = []tls.Certificate{cert}
	case certFile != "":
		return nil, &EnvError{Name: keyName, Reason: fmt.Sprintf("must be set with %s", certName)}
	case keyFile != "":
		return nil, &EnvError{Name: certName, Reason: fmt.Sprintf("must be set with %s", keyName)}
	}
	return cfg, nil
}

// deferred reports a feature of the OTEL_* environment that is not built.
func deferred(feature string) error {
	return &kind.DeferredError{Feature: feature}
}
