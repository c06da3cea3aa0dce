package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// maxErrorBody bounds how much of an error answer is read for the error.
const maxErrorBody = 64 << 10

// errorAnswer is what the service answered with an error status, captured
// before openai-go decodes it: openai-go loses the status of a body it
// cannot decode, and keeps the body only inside an error that also holds
// the request.
type errorAnswer struct {
	status int
	header http.Header
	body   []byte
}

type captureKey struct{}

// withCapture returns a context under which captureErrorAnswer records an
// error answer into the returned errorAnswer.
func withCapture(ctx context.Context) (context.Context, *errorAnswer) {
	a := &errorAnswer{}
	return context.WithValue(ctx, captureKey{}, a), a
}

// captureErrorAnswer is the client's middleware: for an answer with an
// error status it copies the status, the headers and the start of the body
// into the request's errorAnswer, and hands openai-go the body unread.
func captureErrorAnswer(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	a, _ := req.Context().Value(captureKey{}).(*errorAnswer)
	if a == nil {
		return res, err
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	a.status, a.header, a.body = res.StatusCode, res.Header, body
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), res.Body), res.Body}
	return res, nil
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
