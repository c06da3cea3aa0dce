package telemetry

import (
	"errors"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/kind"
)

// TestParseSampler checks each OTEL_TRACES_SAMPLER value against the SDK's
// description of the sampler built, and each bad value against its error.
func TestParseSampler(t *testing.T) {
	cases := []struct {
		sampler, arg string
		wantDesc     string // a prefix of the SDK's Description
		wantErr      string
		deferred     bool
	}{
		{"", "", "ParentBased{root:AlwaysOnSampler,", "", false},
		{"parentbased_always_on", "", "ParentBased{root:AlwaysOnSampler,", "", false},
		{"always_on", "", "AlwaysOnSampler", "", false},
		{"always_off", "", "AlwaysOffSampler", "", false},
		{"parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler,", "", false},
		{"traceidratio", "", "TraceIDRatioBased{1}", "", false},
		{"traceidratio", "0.25", "TraceIDRatioBased{0.25}", "", false},
		{"parentbased_traceidratio", "0", "ParentBased{root:TraceIDRatioBased{0},", "", false},
		{"always_on", "ignored", "AlwaysOnSampler", "", false},
		{"traceidratio", "1.5", "", `OTEL_TRACES_SAMPLER_ARG: "1.5" is not a sampling ratio between 0 and 1`, false},
		{"traceidratio", "NaN", "", `OTEL_TRACES_SAMPLER_ARG: "NaN" is not a sampling ratio between 0 and 1`, false},
		{"parentbased_traceidratio", "-0.1", "", `OTEL_TRACES_SAMPLER_ARG: "-0.1" is not a sampling ratio between 0 and 1`, false},
		{"traceidratio", "half", "", `OTEL_TRACES_SAMPLER_ARG: "half" is not a sampling ratio between 0 and 1`, false},
		{"sometimes", "", "", `OTEL_TRACES_SAMPLER: unknown sampler "sometimes" (supported: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)`, false},
		{"jaeger_remote", "", "", `OTEL_TRACES_SAMPLER: sampler "jaeger_remote" is not built yet`, true},
		{"xray", "", "", `OTEL_TRACES_SAMPLER: sampler "xray" is not built yet`, true},
	}
	for _, c := range cases {
		t.Run(c.sampler+"/"+c.arg, func(t *testing.T) {
			s, err := parseSampler(c.sampler, c.arg)
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				var de *kind.DeferredError
				if errors.As(err, &de) != c.deferred {
					t.Errorf("err %T: deferred = %v, want %v", err, !c.deferred, c.deferred)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseSampler: %v", err)
			}
			if got := s.Description(); !strings.HasPrefix(got, c.wantDesc) {
				t.Errorf("sampler = %q, want prefix %q", got, c.wantDesc)
			}
		})
	}
}

func TestParseHeaders(t *testing.T) {
	cases := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{"", map[string]string{}, ""},
		{"a=1", map[string]string{"a": "1"}, ""},
		{" a = 1 , b=x%2Cy%3Dz ,, ", map[string]string{"a": "1", "b": "x,y=z"}, ""},
		{"authorization=Bearer%20tok=en", map[string]string{"authorization": "Bearer tok=en"}, ""},
		{"a=", map[string]string{"a": ""}, ""},
		{"a=1,novalue", nil, "H: entry 2 is not key=value"},
		{"=v", nil, `H: entry 1 has an invalid header name ""`},
		{"a b=v", nil, `H: entry 1 has an invalid header name "a b"`},
		{"a=%zz", nil, `H: the value of header "a" is not valid URL encoding`},
	}
	for _, c := range cases {
		got, err := parseHeaders("H", c.in)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("parseHeaders(%q) err = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseHeaders(%q): %v", c.in, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("parseHeaders(%q) = %v, want %v", c.in, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("parseHeaders(%q)[%q] = %q, want %q", c.in, k, got[k], v)
			}
		}
	}
}
