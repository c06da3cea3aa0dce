package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/telemetry"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// envOf makes a lookup function over a fixed environment, so no test
// depends on the process environment.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestOffReturnsNoop(t *testing.T) {
	cases := map[string]map[string]string{
		"nothing set":                 {},
		"only unrelated variables":    {"OTEL_SERVICE_NAME": "svc", "OTEL_TRACES_SAMPLER": "always_on"},
		"sdk disabled over endpoint":  {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"sdk disabled, any case":      {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "console"},
		"exporter none over endpoint": {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"},
		"blank endpoint":              {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
		// Off means nothing else is read: a bad sampler must not stop a
		// service that does not trace.
		"disabled ignores bad sampler": {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_SAMPLER": "bogus"},
	}
	for name, vars := range cases {
		t.Run(name, func(t *testing.T) {
			tp, shutdown, err := telemetry.TracerProvider(context.Background(), envOf(vars), "svc", "1.0.0")
			if err != nil {
				t.Fatalf("TracerProvider: %v", err)
			}
			if _, ok := tp.(noop.TracerProvider); !ok {
				t.Fatalf("provider is %T, want noop.TracerProvider", tp)
			}
			if err := shutdown(context.Background()); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
		})
	}
}

// otlpRequest is what the fake collector saw.
type otlpRequest struct {
	path, contentType, apiKey string
	body                      []byte
}

// collector is an OTLP/HTTP receiver that records every request.
func collector(t *testing.T) (*httptest.Server, func() []otlpRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []otlpRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the export body: %v", err)
		}
		mu.Lock()
		got = append(got, otlpRequest{path: r.URL.Path, contentType: r.Header.Get("Content-Type"), apiKey: r.Header.Get("X-Api-Key"), body: body})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []otlpRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]otlpRequest(nil), got...)
	}
}

func TestOTLPExportReachesCollector(t *testing.T) {
	cases := []struct {
		name     string
		vars     func(url string) map[string]string
		wantPath string
	}{
		{
			name: "general endpoint gets the signal path, exporter implied",
			vars: func(u string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u + "/base/", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cr%3Dt%20key,other=1"}
			},
			wantPath: "/base/v1/traces",
		},
		{
			name: "traces endpoint is used as it is, traces headers win",
			vars: func(u string) map[string]string {
				return map[string]string{
					"OTEL_TRACES_EXPORTER":               "otlp",
					"OTEL_EXPORTER_OTLP_PROTOCOL":        "http/protobuf",
					"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": u + "/custom",
					"OTEL_EXPORTER_OTLP_HEADERS":         "x-api-key=wrong",
					"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  "x-api-key=s3cr%3Dt%20key",
					"OTEL_EXPORTER_OTLP_TIMEOUT":         "5000",
				}
			},
			wantPath: "/custom",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, requests := collector(t)
			// The exporter also reads these from the process environment;
			// lookupEnv must win over every one of them.
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=from-process")
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/wrong")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
			vars := c.vars(srv.URL)
			vars["OTEL_RESOURCE_ATTRIBUTES"] = "deployment.environment=test,service.version=from-env"
			ctx := context.Background()
			tp, shutdown, err := telemetry.TracerProvider(ctx, envOf(vars), "orders", "1.2.3")
			if err != nil {
				t.Fatalf("TracerProvider: %v", err)
			}
			_, span := tp.Tracer("test").Start(ctx, "gen_ai.chat")
			span.End()
			if err := shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			got := requests()
			if len(got) != 1 {
				t.Fatalf("collector saw %d requests after shutdown, want 1 (shutdown must flush)", len(got))
			}
			r := got[0]
			if r.path != c.wantPath {
				t.Errorf("path = %q, want %q", r.path, c.wantPath)
			}
			if r.contentType != "application/x-protobuf" {
				t.Errorf("content type = %q, want application/x-protobuf", r.contentType)
			}
			if r.apiKey != "s3cr=t key" {
				t.Errorf("x-api-key = %q, want the URL-decoded %q", r.apiKey, "s3cr=t key")
			}
			var req coltracepb.ExportTraceServiceRequest
			if err := proto.Unmarshal(r.body, &req); err != nil {
				t.Fatalf("decoding the export: %v", err)
			}
			rs := req.GetResourceSpans()
			if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || len(rs[0].GetScopeSpans()[0].GetSpans()) != 1 {
				t.Fatalf("export holds %v, want one span", &req)
			}
			if name := rs[0].GetScopeSpans()[0].GetSpans()[0].GetName(); name != "gen_ai.chat" {
				t.Errorf("span name = %q, want gen_ai.chat", name)
			}
			attrs := map[string]string{}
			for _, kv := range rs[0].GetResource().GetAttributes() {
				attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			want := map[string]string{"service.name": "orders", "service.version": "from-env", "deployment.environment": "test", "telemetry.sdk.language": "go"}
			for k, v := range want {
				if attrs[k] != v {
					t.Errorf("resource %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
				}
			}
		})
	}
}

func TestServiceNamePrecedence(t *testing.T) {
	cases := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"argument", map[string]string{}, "arg"},
		{"resource attributes over argument", map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=attr"}, "attr"},
		{"OTEL_SERVICE_NAME over both", map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=attr", "OTEL_SERVICE_NAME": "env"}, "env"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			c.vars["OTEL_TRACES_EXPORTER"] = "console"
			tp, shutdown, err := telemetry.TracerProvider(context.Background(), envOf(c.vars), "arg", "", telemetry.WithConsoleWriter(&buf))
			if err != nil {
				t.Fatalf("TracerProvider: %v", err)
			}
			_, span := tp.Tracer("test").Start(context.Background(), "s")
			span.End()
			if err := shutdown(context.Background()); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if got := consoleResource(t, buf.Bytes())["service.name"]; got != c.want {
				t.Errorf("service.name = %q, want %q", got, c.want)
			}
		})
	}
}

// consoleResource decodes the console exporter's first span and returns its
// resource attributes.
func consoleResource(t *testing.T, out []byte) map[string]string {
	t.Helper()
	var span struct {
		Name     string
		Resource []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&span); err != nil {
		t.Fatalf("console output is not JSON: %v\n%s", err, out)
	}
	attrs := map[string]string{}
	for _, kv := range span.Resource {
		s, _ := kv.Value.Value.(string)
		attrs[kv.Key] = s
	}
	return attrs
}

func TestConsoleExporterWritesJSON(t *testing.T) {
	var buf bytes.Buffer
	vars := map[string]string{"OTEL_TRACES_EXPORTER": "console"}
	ctx := context.Background()
	tp, shutdown, err := telemetry.TracerProvider(ctx, envOf(vars), "svc", "0.1.0", telemetry.WithConsoleWriter(&buf))
	if err != nil {
		t.Fatalf("TracerProvider: %v", err)
	}
	_, span := tp.Tracer("test").Start(ctx, "agent.step")
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	var got struct{ Name string }
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &got); err != nil {
		t.Fatalf("console output is not one JSON span: %v\n%s", err, buf.Bytes())
	}
	if got.Name != "agent.step" {
		t.Errorf("span name = %q, want agent.step", got.Name)
	}
	if res := consoleResource(t, buf.Bytes()); res["service.version"] != "0.1.0" {
		t.Errorf("service.version = %q, want 0.1.0", res["service.version"])
	}
}

// TestSamplerApplied checks that the sampler the environment names is the
// one the provider uses, by whether a root span reaches the exporter.
func TestSamplerApplied(t *testing.T) {
	cases := []struct {
		sampler, arg string
		exported     bool
	}{
		{"", "", true},
		{"always_on", "", true},
		{"always_off", "", false},
		{"parentbased_always_off", "", false},
		{"traceidratio", "0", false},
		{"parentbased_traceidratio", "1", true},
	}
	for _, c := range cases {
		t.Run(c.sampler+"/"+c.arg, func(t *testing.T) {
			var buf bytes.Buffer
			vars := map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_TRACES_SAMPLER": c.sampler, "OTEL_TRACES_SAMPLER_ARG": c.arg}
			tp, shutdown, err := telemetry.TracerProvider(context.Background(), envOf(vars), "svc", "", telemetry.WithConsoleWriter(&buf))
			if err != nil {
				t.Fatalf("TracerProvider: %v", err)
			}
			_, span := tp.Tracer("test").Start(context.Background(), "root")
			span.End()
			if err := shutdown(context.Background()); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if got := buf.Len() > 0; got != c.exported {
				t.Errorf("span exported = %v, want %v (output %q)", got, c.exported, buf.String())
			}
		})
	}
}

func TestBadConfigurationErrors(t *testing.T) {
	cases := []struct {
		name    string
		vars    map[string]string
		want    string
		wantErr func(error) bool
	}{
		{
			name: "unknown exporter",
			vars: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			want: `OTEL_TRACES_EXPORTER: unknown exporter "zipkin" (supported: otlp, console, none)`,
		},
		{
			name: "none with others",
			vars: map[string]string{"OTEL_TRACES_EXPORTER": "none,console"},
			want: `OTEL_TRACES_EXPORTER: "none,console" names none together with other exporters`,
		},
		{
			name: "sdk disabled not a boolean",
			vars: map[string]string{"OTEL_SDK_DISABLED": "yes", "OTEL_TRACES_EXPORTER": "console"},
			want: `OTEL_SDK_DISABLED: "yes" is neither true nor false`,
		},
		{
			name: "grpc is deferred",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: `OTEL_EXPORTER_OTLP_PROTOCOL: OTLP over gRPC (use http/protobuf, which collectors accept on port 4318) is not built yet`,
			wantErr: func(err error) bool {
				var de *kind.DeferredError
				return errors.As(err, &de)
			},
		},
		{
			name: "traces protocol wins and is checked",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"},
			want: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: unknown protocol "thrift" (supported: http/protobuf, http/json)`,
		},
		{
			name: "endpoint without scheme",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
			want: `OTEL_EXPORTER_OTLP_ENDPOINT: collector:4318 is not an http:// or https:// URL with a host`,
		},
		{
			name: "timeout not a number",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "10s"},
			want: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "10s" is not a non-negative integer`,
		},
		{
			name: "unknown compression",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
			want: `OTEL_EXPORTER_OTLP_COMPRESSION: unknown compression "zstd" (supported: gzip, none)`,
		},
		{
			name: "resource attribute without value",
			vars: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_RESOURCE_ATTRIBUTES": "a=1,broken"},
			want: `OTEL_RESOURCE_ATTRIBUTES: entry 2 is not key=value`,
		},
		{
			name: "zero queue",
			vars: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_MAX_QUEUE_SIZE": "0"},
			want: `OTEL_BSP_MAX_QUEUE_SIZE: 0 would drop every span; use OTEL_TRACES_EXPORTER=none to turn tracing off`,
		},
		{
			name: "certificate file missing",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"},
			want: `OTEL_EXPORTER_OTLP_CERTIFICATE: reading the CA certificate: open /nonexistent/ca.pem: no such file or directory`,
		},
		{
			name: "client certificate without key",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/x/cert.pem"},
			want: `OTEL_EXPORTER_OTLP_CLIENT_KEY: must be set with OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp, shutdown, err := telemetry.TracerProvider(context.Background(), envOf(c.vars), "svc", "", telemetry.WithConsoleWriter(io.Discard))
			if err == nil {
				_ = shutdown(context.Background())
				t.Fatalf("TracerProvider succeeded with %T, want error %q", tp, c.want)
			}
			if err.Error() != c.want {
				t.Errorf("err = %q\nwant  %q", err, c.want)
			}
			if c.wantErr != nil && !c.wantErr(err) {
				t.Errorf("err %T has the wrong type", err)
			}
			if c.wantErr == nil {
				var ee *telemetry.EnvError
				if !errors.As(err, &ee) {
					t.Errorf("err is %T, want *telemetry.EnvError", err)
				}
			}
		})
	}
}

// TestSecretsNeverInErrors feeds header and endpoint values that carry a
// secret through every way they can be malformed and checks that the secret
// never reaches the error.
func TestSecretsNeverInErrors(t *testing.T) {
	const secret = "sk-SUPERSECRET"
	cases := []map[string]string{
		{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%ZZ" + secret},        // bad URL encoding
		{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=ok," + secret},                    // a pasted bare secret
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "bad key=" + secret},                // invalid header name
		{"OTEL_EXPORTER_OTLP_HEADERS": "x=1", "OTEL_TRACES_EXPORTER": "zipkin"},   // later error, headers set
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:" + secret + "@host:4318"},   // credentials in the URL
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://user:" + secret + "@host:4318"},    // bad scheme with credentials
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:" + secret + "@host:4318/%"}, // unparsable with credentials
	}
	for i, vars := range cases {
		if _, ok := vars["OTEL_TRACES_EXPORTER"]; !ok {
			vars["OTEL_TRACES_EXPORTER"] = "otlp"
		}
		_, shutdown, err := telemetry.TracerProvider(context.Background(), envOf(vars), "svc", "")
		if err == nil {
			_ = shutdown(context.Background())
			t.Errorf("case %d: TracerProvider accepted %v", i, vars)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "SUPERSECRET") {
			t.Errorf("case %d: error leaks the secret: %v", i, err)
		}
	}
}
