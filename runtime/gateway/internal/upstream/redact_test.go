package upstream

import (
	"encoding/base64"
	"net/url"
	"testing"
)

func TestRedactor(t *testing.T) {
	const key = "sk-proj-Zx9/Qa+Lm=0042_abcdef"
	tests := []struct {
		name, key, in, want string
	}{
		{"no key configured", "", "anything " + key, "anything " + key},
		{"ordinary text is kept", key, "model gpt-4o not found (invalid_request_error)", "model gpt-4o not found (invalid_request_error)"},
		{"the key", key, "bad key " + key + ".", "bad key [redacted]."},
		{"the header value", key, "got Bearer " + key, "got Bearer [redacted]"},
		{"twice in a row", key, key + key, "[redacted]"},
		{"upper case", key, "KEY SK-PROJ-ZX9/QA+LM=0042_ABCDEF", "KEY [redacted]"},
		{"percent-encoded", key, "?k=" + url.QueryEscape(key) + "&b=1", "?k=[redacted]&b=1"},
		{"JSON-escaped slash", key, `"sk-proj-Zx9\/Qa+Lm=0042_abcdef"`, `"[redacted]"`},
		{"HTML entities", key, "sk-proj-Zx9&#x2F;Qa&#43;Lm=0042_abcdef", "[redacted]"},
		{"a long piece", key, "key ends in Lm=0042_abcdef", "key ends in [redacted]"},
		{"a short piece is kept", key, "prefix sk-proj", "prefix sk-proj"},
		{"base64 of a Basic header", key, "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+key)) + " ok", "Basic [redacted] ok"},
		{"base64 at each alignment", key, base64.RawURLEncoding.EncodeToString([]byte("ab" + key + "cd")), "[redacted]"},
		{"text around is intact", key, "ключ «" + key + "» ключ", "ключ «[redacted]» ключ"},
		{"a short key is found whole", "abc12", "x abc12 y ABC12 abc1", "x [redacted] y [redacted] abc1"},
		{"a truncated escape is text", key, "100%", "100%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewRedactor(tt.key).String(tt.in); got != tt.want {
				t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// BenchmarkRedactModel measures the redaction every answer pays: its model
// name and finish reason, which hold no key.
func BenchmarkRedactModel(b *testing.B) {
	r := NewRedactor("sk-proj-Zx9/Qa+Lm=0042_abcdef")
	b.ReportAllocs()
	for b.Loop() {
		_ = r.String("gpt-4o-mini-2024-07-18")
		_ = r.String("stop")
	}
}
