package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/aidgen/aid/runtime/gateway/internal/upstream"
)

// withCapture returns a context under which the client's middleware
// (upstream.CaptureErrorAnswer) records an error answer into the returned
// upstream.Exchange: openai-go loses the status of a body it cannot
// decode, and keeps the body only inside an error that also holds the
// request.
func withCapture(ctx context.Context) (context.Context, *upstream.Exchange) {
	return upstream.WithExchange(ctx)
}

// apiError reads an error answer (or an SSE error event's data): an OpenAI
// error object, whose fields it keeps; an "error" that is a bare string or
// another value, kept as the message; or anything else, whose start becomes
// the message. Every string has the key redacted before it is cut short.
func (p *Provider) apiError(status int, body []byte) *APIError {
	e := &APIError{StatusCode: status}
	var envelope struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &envelope) == nil && len(envelope.Error) > 0 && string(envelope.Error) != "null" {
		var fields map[string]json.RawMessage
		if json.Unmarshal(envelope.Error, &fields) == nil {
			e.Message = p.field(fields["message"])
			e.Type = p.field(fields["type"])
			e.Code = p.field(fields["code"])
			e.Param = p.field(fields["param"])
			return e
		}
		e.Message = p.field(envelope.Error)
		return e
	}
	e.Message = p.red.Excerpt(string(body))
	return e
}

// field renders one value of an error object as text: a string as itself,
// null as nothing, anything else as its JSON.
func (p *Provider) field(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			raw = b.Bytes()
		}
		s = string(raw)
	}
	return p.red.Excerpt(s)
}
