package telemetry

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// EnvError reports an OTEL_* variable whose value cannot be used. It names
// the variable so an operator knows what to fix; it never quotes a value
// that may be secret.
type EnvError struct {
	// Name is the environment variable, for example "OTEL_TRACES_SAMPLER".
	Name string
	// Reason says what is wrong with it and, where it helps, what is accepted.
	Reason string
}

// Error implements error.
func (e *EnvError) Error() string {
	return fmt.Sprintf("%s: %s", e.Name, e.Reason)
}

// env wraps the lookup function with the trimming every OTEL_* variable gets:
// a variable set to blanks counts as unset, as in the OpenTelemetry SDKs.
type env func(string) (string, bool)

func (e env) get(name string) string {
	v, ok := e(name)
	if !ok {
		return ""
	}
	return strings.TrimSpace(v)
}

// signal returns the traces-specific OTLP variable when it is set, else the
// general one, with the name of the variable the value came from, because
// the OTLP specification gives the signal-specific one precedence.
func (e env) signal(suffix string) (value, name string) {
	specific := "OTEL_EXPORTER_OTLP_TRACES_" + suffix
	if v := e.get(specific); v != "" {
		return v, specific
	}
	general := "OTEL_EXPORTER_OTLP_" + suffix
	return e.get(general), general
}

// parseHeaders parses an OTLP headers variable: comma-separated key=value
// pairs whose values are URL-encoded. Errors name the variable and the key,
// never the value, because header values usually carry API keys.
func parseHeaders(name, s string) (map[string]string, error) {
	headers := map[string]string{}
	if s == "" {
		return headers, nil
	}
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, found := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !found {
			// The pair may be a bare secret pasted without its key, so
			// only its position is named.
			return nil, &EnvError{Name: name, Reason: fmt.Sprintf("entry %d is not key=value", i+1)}
		}
		if !validHeaderKey(k) {
			return nil, &EnvError{Name: name, Reason: fmt.Sprintf("entry %d has an invalid header name %q", i+1, k)}
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, &EnvError{Name: name, Reason: fmt.Sprintf("the value of header %q is not valid URL encoding", k)}
		}
		headers[k] = val
	}
	return headers, nil
}

// validHeaderKey reports whether k is an HTTP header field name (an RFC 9110
// token).
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// parseResourceAttributes parses OTEL_RESOURCE_ATTRIBUTES: comma-separated
// key=value pairs with URL-encoded values, all of them strings.
func parseResourceAttributes(s string) ([]attribute.KeyValue, error) {
	const name = "OTEL_RESOURCE_ATTRIBUTES"
	var attrs []attribute.KeyValue
	if s == "" {
		return nil, nil
	}
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, found := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !found || k == "" {
			return nil, &EnvError{Name: name, Reason: fmt.Sprintf("entry %d is not key=value", i+1)}
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, &EnvError{Name: name, Reason: fmt.Sprintf("the value of %q is not valid URL encoding", k)}
		}
		attrs = append(attrs, attribute.String(k, val))
	}
	return attrs, nil
}

// samplerNames lists the OTEL_TRACES_SAMPLER values that are built, for the
// error that rejects any other.
const samplerNames = "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"

// parseSampler builds the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name. The default is parentbased_always_on, as the
// specification says; a ratio defaults to 1.
func parseSampler(sampler, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r != r || r < 0 || r > 1 { // r != r: NaN
			return 0, &EnvError{Name: "OTEL_TRACES_SAMPLER_ARG", Reason: fmt.Sprintf("%q is not a sampling ratio between 0 and 1", arg)}
		}
		return r, nil
	}
	switch sampler {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if sampler == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	case "jaeger_remote", "parentbased_jaeger_remote", "xray":
		return nil, fmt.Errorf("OTEL_TRACES_SAMPLER: %w", deferred(fmt.Sprintf("sampler %q", sampler)))
	default:
		return nil, &EnvError{Name: "OTEL_TRACES_SAMPLER", Reason: fmt.Sprintf("unknown sampler %q (supported: %s)", sampler, samplerNames)}
	}
}

// parseNonNegativeInt parses an integer variable that may not be negative,
// such as a timeout in milliseconds or a queue size; def is returned when the
// variable is unset.
func parseNonNegativeInt(name, s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, &EnvError{Name: name, Reason: fmt.Sprintf("%q is out of range", s)}
		}
		return 0, &EnvError{Name: name, Reason: fmt.Sprintf("%q is not a non-negative integer", s)}
	}
	return n, nil
}
