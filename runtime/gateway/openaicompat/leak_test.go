package openaicompat_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// hostileKeys are the keys the adversarial upstream echoes: the usual shape,
// and one whose URL and JSON encodings differ from the key itself.
var hostileKeys = []string{
	sentinel,
	"sk-Adv/ers+ary=K3y_<0123456789>&ABCDEF\"ghij",
}

// echoes returns every form in which a careless or hostile upstream may
// echo the key: as sent, in the Authorization header's value, URL-encoded,
// upper-cased, base64-encoded the ways Basic and Bearer headers and URL-safe
// tokens are, escaped for JSON and for HTML, and cut in two.
func echoes(key string) []string {
	h := len(key) / 2
	var jsonEsc, htmlEsc strings.Builder
	for _, r := range key {
		fmt.Fprintf(&jsonEsc, `\u%04x`, r)
		fmt.Fprintf(&htmlEsc, "&#%d;", r)
	}
	lowerHex := strings.NewReplacer("%2F", "%2f", "%2B", "%2b", "%3D", "%3d", "%3C", "%3c", "%3E", "%3e", "%26", "%26", "%22", "%22").Replace(url.QueryEscape(key))
	return []string{
		key,
		"Bearer " + key,
		url.QueryEscape(key),
		url.PathEscape(key),
		lowerHex,
		strings.ToUpper(key),
		base64.StdEncoding.EncodeToString([]byte("user:" + key)),
		"Basic " + base64.StdEncoding.EncodeToString([]byte(":"+key)),
		base64.StdEncoding.EncodeToString([]byte("Bearer " + key)),
		"token=" + base64.RawURLEncoding.EncodeToString([]byte(key)) + "&x=1",
		jsonEsc.String(),
		htmlEsc.String(),
		key[:h] + " ... " + key[h:],
	}
}

// hostileText is one string holding every echo of key.
func hostileText(key string) string { return "echo: " + strings.Join(echoes(key), " | ") }

// leaks lists what in s gives the key away: any echo form, any eight
// characters of the key in a row (in any case, raw or escaped), or the
// base64 of a run of it.
func leaks(key, s string) []string {
	var found []string
	for _, e := range echoes(key) {
		if strings.Contains(s, e) {
			found = append(found, e)
		}
	}
	unescaped := s
	if u, err := url.QueryUnescape(s); err == nil {
		unescaped = u
	}
	var decoded string
	_ = json.Unmarshal([]byte(`"`+strings.ReplaceAll(s, `"`, `\"`)+`"`), &decoded)
	for _, text := range []string{s, unescaped, decoded} {
		low := strings.ToLower(text)
		for i := 0; i+8 <= len(key); i++ {
			if w := strings.ToLower(key[i : i+8]); strings.Contains(low, w) {
				found = append(found, "fragment "+w)
			}
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := range 3 {
			b := enc.EncodeToString(append(make([]byte, pad), key...))
			start, end := 4*((pad+2)/3), 4*((pad+len(key))/3)
			if core := b[start:end]; strings.Contains(s, core[4:len(core)-4]) {
				found = append(found, "base64 "+core)
			}
		}
	}
	return found
}

// errorTexts prints err every way a caller, a logger or a tracer might:
// each verb, for err and for every error it wraps, every attempt's error,
// and the APIError's fields.
func errorTexts(err error) []string {
	var out []string
	seen := map[error]bool{}
	var walk func(error)
	walk = func(e error) {
		if e == nil || (reflect.TypeOf(e).Comparable() && seen[e]) {
			return
		}
		if reflect.TypeOf(e).Comparable() {
			seen[e] = true
		}
		out = append(out, e.Error(), fmt.Sprintf("%v", e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e), fmt.Sprintf("%q", e))
		if ae, ok := e.(*openaicompat.APIError); ok {
			out = append(out, fmt.Sprintf("%#v", *ae))
		}
		if pe, ok := e.(*gateway.ProviderError); ok {
			out = append(out, fmt.Sprintf("%#v", *pe))
		}
		if ce, ok := e.(*gateway.CallError); ok {
			for _, a := range ce.Attempts {
				out = append(out, fmt.Sprintf("%+v", a))
				walk(a.Err)
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

// TestHostileUpstreamNeverLeaksTheKey drives a real Gateway, with retries,
// fallbacks, a recording tracer and a JSON logger, against an upstream that
// echoes the key in every field of every answer it can give: each error
// status, JSON error objects and strings, plain text and HTML bodies,
// response headers, SSE error events before and after text, embeddings,
// and the model and finish reason of answers that succeed. The key must
// reach the upstream's Authorization header and appear in no error, no
// attempt, no span and no log line.
func TestHostileUpstreamNeverLeaksTheKey(t *testing.T) {
	type scenario struct {
		name string
		op   string // generate, stream or embed
		ok   bool   // the call succeeds (the answer itself is hostile, or a fallback answers)
		// shows says the upstream's text must still be shown, redacted.
		shows bool
		h     func(key string) handler
	}
	errorBody := func(kind, key string) (contentType, body string) {
		text := hostileText(key)
		h := len(key) / 2
		switch kind {
		case "json object":
			obj := map[string]any{"error": map[string]any{
				"message": text, "type": text, "code": text, "param": text,
				"extra": text,
			}}
			b, _ := json.Marshal(obj)
			return "application/json", string(b)
		case "json split":
			obj := map[string]any{"error": map[string]any{"message": "bad key", "code": key[:h], "param": key[h:], "type": "Bearer " + key[:h]}}
			b, _ := json.Marshal(obj)
			return "application/json", string(b)
		case "json numeric code":
			return "application/json", fmt.Sprintf(`{"error":{"message":{"nested":%q},"code":401,"type":null,"param":[%q]}}`, text, key)
		case "json string":
			b, _ := json.Marshal(map[string]any{"error": text})
			return "application/json", string(b)
		case "plain text":
			return "text/plain", "upstream proxy rejected the request: " + text
		case "html":
			return "text/html", "<html><head><title>Error</title></head><body><pre>" + text + "</pre></body></html>"
		}
		panic(kind)
	}
	echoHeaders := func(w http.ResponseWriter, r *http.Request, key string) {
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("X-Request-Id", "req_"+key)
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+key+`"`)
	}
	var scenarios []scenario
	for _, status := range []int{400, 401, 429, 500, 503} {
		for _, kind := range []string{"json object", "json split", "json numeric code", "json string", "plain text", "html"} {
			for _, op := range []string{"generate", "stream", "embed"} {
				scenarios = append(scenarios, scenario{
					name: fmt.Sprintf("%s %d %s", op, status, kind), op: op, shows: true,
					h: func(key string) handler {
						return func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
							echoHeaders(w, r, key)
							if status == 429 {
								w.Header().Set("Retry-After", "0.001")
							}
							ct, b := errorBody(kind, key)
							w.Header().Set("Content-Type", ct)
							w.WriteHeader(status)
							_, _ = w.Write([]byte(b))
						}
					},
				})
			}
		}
	}
	sseError := func(before bool, data func(key string) string) func(key string) handler {
		return func(key string) handler {
			return func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				echoHeaders(w, r, key)
				s := startSSE(w)
				if !before {
					s.data(chunk(large, textDelta("partial "), ""))
				}
				s.data(data(key))
			}
		}
	}
	objectEvent := func(key string) string {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": hostileText(key), "type": hostileText(key), "code": key, "param": "Bearer " + key}})
		return string(b)
	}
	stringEvent := func(key string) string {
		b, _ := json.Marshal(map[string]any{"error": hostileText(key)})
		return string(b)
	}
	escapedEvent := func(key string) string { // every character of the key \u-escaped in the raw event
		var esc strings.Builder
		for _, r := range key {
			fmt.Fprintf(&esc, `\u%04x`, r)
		}
		return `{"error":{"message":"key ` + esc.String() + ` refused","code":"` + esc.String() + `"}}`
	}
	scenarios = append(scenarios,
		scenario{name: "stream error event after text", op: "stream", shows: true, h: sseError(false, objectEvent)},
		scenario{name: "stream error event before text", op: "stream", shows: true, h: sseError(true, objectEvent)},
		scenario{name: "stream error string event", op: "stream", shows: true, h: sseError(false, stringEvent)},
		scenario{name: "stream error event escaped", op: "stream", shows: true, h: sseError(true, escapedEvent)},
		scenario{name: "generate answer names the key as model and finish reason", op: "generate", ok: true, h: func(key string) handler {
			return func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				echoHeaders(w, r, key)
				writeJSON(w, 200, completion(hostileText(key), textMessage("fine"), "Bearer "+key, 5, 1))
			}
		}},
		scenario{name: "stream answer names the key as model and finish reason", op: "stream", ok: true, h: func(key string) handler {
			return func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				echoHeaders(w, r, key)
				s := startSSE(w)
				s.data(chunk(hostileText(key), textDelta("fine"), ""))
				s.data(chunk(key, `{}`, "Bearer "+key))
				s.data(usageChunk(key, 5, 1))
				s.data("[DONE]")
			}
		}},
		scenario{name: "embed answer names the key as model", op: "embed", ok: true, h: func(key string) handler {
			return func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				echoHeaders(w, r, key)
				writeJSON(w, 200, fmt.Sprintf(`{"object":"list","model":%q,"data":[{"object":"embedding","index":0,"embedding":[1,0,0]}],"usage":{"prompt_tokens":1,"total_tokens":1}}`, hostileText(key)))
			}
		}},
		scenario{name: "generate falls back past a hostile error", op: "generate", ok: true, shows: true, h: func(key string) handler {
			return func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				echoHeaders(w, r, key)
				if modelOf(body) == large {
					_, b := errorBody("json object", key)
					writeJSON(w, 503, b)
					return
				}
				writeJSON(w, 200, completion(small, textMessage("small answered"), "stop", 5, 1))
			}
		}},
		scenario{name: "stream falls back past a hostile error", op: "stream", ok: true, shows: true, h: func(key string) handler {
			return func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				echoHeaders(w, r, key)
				if modelOf(body) == large {
					w.Header().Set("Content-Type", "text/plain")
					w.WriteHeader(500)
					_, _ = w.Write([]byte(hostileText(key)))
					return
				}
				s := startSSE(w)
				s.data(chunk(small, textDelta("small streams"), ""))
				s.data(chunk(small, `{}`, "stop"))
				s.data("[DONE]")
			}
		}},
	)
	for ki, key := range hostileKeys {
		for _, sc := range scenarios {
			t.Run(fmt.Sprintf("key %d/%s", ki, sc.name), func(t *testing.T) {
				e := setup(t, sc.h(key), func(c *openaicompat.Config) {
					c.LookupEnv = func(string) (string, bool) { return key, true }
				})
				var texts []string
				var err error
				var attempts []gateway.Attempt
				switch sc.op {
				case "generate":
					var res gateway.Result
					res, err = e.g.Generate(t.Context(), "large", ask("hi"), gateway.WithFallbacks("small"))
					attempts = res.Attempts
					texts = append(texts, res.Model, string(res.FinishReason), fmt.Sprintf("%+v", res))
				case "stream":
					for c, cerr := range e.g.Stream(t.Context(), "large", ask("hi"), gateway.WithFallbacks("small"), gateway.WithBudget("nightly", "r")) {
						if cerr != nil {
							err = cerr
							break
						}
						if c.Result != nil {
							attempts = c.Result.Attempts
							texts = append(texts, c.Result.Model, string(c.Result.FinishReason), fmt.Sprintf("%+v", *c.Result))
						}
					}
				case "embed":
					var res gateway.EmbedResult
					res, err = e.g.Embed(t.Context(), "embed", []string{"a"})
					attempts = res.Attempts
					texts = append(texts, res.Model, fmt.Sprintf("%+v", res))
				}
				if sc.ok != (err == nil) {
					t.Fatalf("%s: %v, want success %v", sc.op, err, sc.ok)
				}
				if err != nil {
					var pe *gateway.ProviderError
					if !errors.As(err, &pe) {
						t.Errorf("%v is not a *ProviderError", err)
					}
				}
				texts = append(texts, errorTexts(err)...)
				for _, a := range attempts {
					texts = append(texts, fmt.Sprintf("%+v", a))
					texts = append(texts, errorTexts(a.Err)...)
				}
				if sc.shows {
					joined := strings.Join(texts, "\n")
					if !strings.Contains(joined, "[redacted]") {
						t.Errorf("the upstream's error text was dropped, not redacted:\n%s", joined)
					}
				}
				for _, r := range e.srv.recorded() {
					if r.Auth != "Bearer "+key {
						t.Fatalf("the upstream did not get the key: %q", r.Auth)
					}
				}
				for _, s := range texts {
					if l := leaks(key, s); len(l) > 0 {
						t.Errorf("error or result shows the key as %q:\n%s", l, s)
					}
				}
				if e.logs.Len() == 0 && len(e.srv.recorded()) > 1 {
					t.Error("a retry or fallback was not logged, so the log check proves nothing")
				}
				if l := leaks(key, e.logs.String()); len(l) > 0 {
					t.Errorf("logs show the key as %q:\n%s", l, e.logs.String())
				}
				spans := e.spans.Ended()
				if len(spans) == 0 {
					t.Fatal("no spans")
				}
				for _, s := range spans {
					dump := fmt.Sprintf("%s %v %q %v", s.Name(), s.Attributes(), s.Status().Description, s.Status())
					for _, ev := range s.Events() {
						dump += fmt.Sprintf(" %s %v", ev.Name, ev.Attributes)
					}
					if l := leaks(key, dump); len(l) > 0 {
						t.Errorf("span shows the key as %q: %s", l, dump)
					}
				}
			})
		}
	}
}
