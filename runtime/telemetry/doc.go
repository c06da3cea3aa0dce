// Package telemetry configures OpenTelemetry tracing for a generated aid
// service from the standard OTEL_* environment, so that operators set up
// trace export the way they do for any other OpenTelemetry program and
// nothing is exported unless they ask for it.
//
// [TracerProvider] reads the environment through a lookup function rather
// than the process environment, so tests and embedders decide what it sees.
// It understands:
//
//   - OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none, or no exporter and no
//     OTLP endpoint at all: tracing is off and a no-op provider is returned.
//   - OTEL_TRACES_EXPORTER: a comma-separated list of "otlp" and "console"
//     (the default is "otlp" when an OTLP endpoint is set).
//   - OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _PROTOCOL (http/protobuf, the
//     default, or http/json; grpc is reported as not built), _HEADERS,
//     _TIMEOUT, _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE and
//     _CLIENT_KEY, the signal-specific variable taking precedence.
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES for the resource.
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG for the sampler.
//   - OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT, OTEL_BSP_MAX_QUEUE_SIZE
//     and OTEL_BSP_MAX_EXPORT_BATCH_SIZE for the batch span processor.
//
// A malformed value is an error naming the variable, never a silent
// default: a service that was asked to export and cannot should not start
// and drop its spans. Header values usually carry API keys, so they never
// appear in an error.
//
// The package is not for instrumentation: it builds the provider and leaves
// span creation to the gateway, agents and pipelines. It does not configure
// metrics or logs, the Jaeger-remote or X-Ray samplers, or the span-limit
// variables (OTEL_SPAN_*, OTEL_ATTRIBUTE_*), which the SDK reads from the
// process environment itself.
package telemetry
