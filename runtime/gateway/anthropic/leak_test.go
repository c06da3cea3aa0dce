package anthropic_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/anthropic"
)

// echo is the key as a careless or hostile upstream echoes it: as sent,
// in the Authorization header, URL-encoded, upper-cased, base64-encoded
// and cut in two.
func echo() string {
	h := len(sentinel) / 2
	return strings.Join([]string{
		sentinel, "Bearer " + sentinel, url.QueryEscape(sentinel), strings.ToUpper(sentinel),
		base64.StdEncoding.EncodeToString([]byte("Bearer " + sentinel)), sentinel[:h] + " ... " + sentinel[h:],
	}, " | ")
}

// leaked reports whether s holds any eight characters of the key in a
// row, in any case, or its base64.
func leaked(s string) bool {
	low := strings.ToLower(s)
	for i := 0; i+8 <= len(sentinel); i++ {
		if strings.Contains(low, strings.ToLower(sentinel[i:i+8])) {
			return true
		}
	}
	return strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(sentinel))[4:20])
}

// TestEchoedKeyIsRedacted: an upstream that echoes the key in whatever it
// says (an error object's type and message, a body that is not JSON, an
// error event, an event that is not JSON, the model name and stop reason
// of an answer, a content block's type) never gets it into an error, the
// answer's metadata, or the printed provider.
func TestEchoedKeyIsRedacted(t *testing.T) {
	e := echo()
	cases := map[string]handler{
		"error object": func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			writeJSON(w, 401, apiError("authentication_error "+e, "invalid x-api-key: "+e))
		},
		"plain body": func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			w.WriteHeader(502)
			_, _ = w.Write([]byte("<html>bad gateway for " + e + "</html>"))
		},
		"error event": func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			if body["stream"] != true {
				writeJSON(w, 400, apiError("x", e))
				return
			}
			s := startSSE(w)
			s.start(sonnet, 1)
			s.event("error", apiError("overloaded_error", "key "+e))
		},
		"error event not JSON": func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			if body["stream"] != true {
				writeJSON(w, 400, "not json "+e)
				return
			}
			s := startSSE(w)
			s.event("error", "key "+e)
		},
		"unknown block": func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			writeJSON(w, 200, message(sonnet, `[{"type":"`+strings.ReplaceAll(e, `"`, ``)+`"}]`, "end_turn", 1, 1))
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, h)
			p := newProvider(t, srv.URL)
			_, gerr := p.Generate(t.Context(), spec(sonnet), ask("hi"))
			var serr error
			if s, err := p.Stream(t.Context(), spec(sonnet), ask("hi")); err != nil {
				serr = err
			} else {
				for serr == nil {
					_, serr = s.Next()
				}
				s.Close()
			}
			for _, err := range []error{gerr, serr} {
				if err == nil {
					t.Fatal("no error")
				}
				for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", errors.Unwrap(err))} {
					if leaked(text) {
						t.Errorf("the key leaks: %s", text)
					}
				}
			}
		})
	}
	t.Run("answer metadata", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			writeJSON(w, 200, message(sentinel, "["+textBlock("the text is the caller's")+"]", "weird "+sentinel, 1, 1))
		})
		p := newProvider(t, srv.URL)
		res, err := p.Generate(t.Context(), spec(sonnet), ask("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if leaked(res.Model) || leaked(string(res.FinishReason)) {
			t.Errorf("the key leaks into the answer's metadata: %q, %q", res.Model, res.FinishReason)
		}
		var logs strings.Builder
		slog.New(slog.NewTextHandler(&logs, nil)).Info("provider", "p", p)
		for _, text := range []string{fmt.Sprintf("%v %+v %#v", p, p, p), logs.String()} {
			if leaked(text) {
				t.Errorf("the printed provider leaks the key: %s", text)
			}
		}
	})
}

// TestKeyStaysHome: a redirect to another origin is not followed, so the
// key never reaches it, and no setting comes from the ANTHROPIC_*
// variables the SDK reads by default: not the base URL, not extra
// headers, not a key when the configuration names no variable.
func TestKeyStaysHome(t *testing.T) {
	elsewhere := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, message(sonnet, "["+textBlock("stolen")+"]", "end_turn", 1, 1))
	})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		http.Redirect(w, r, elsewhere.URL+"/v1/messages", http.StatusTemporaryRedirect)
	})
	p := newProvider(t, srv.URL)
	if _, err := p.Generate(t.Context(), spec(sonnet), ask("hi")); err == nil {
		t.Error("a redirect elsewhere was followed")
	}
	if n := len(elsewhere.recorded()); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}

	t.Setenv("ANTHROPIC_BASE_URL", elsewhere.URL)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "sk-ant-token-from-the-environment")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Smuggled: yes")
	home := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, message(sonnet, "["+textBlock("ok")+"]", "end_turn", 1, 1))
	})
	keyless := newProvider(t, home.URL, func(c *anthropic.Config) { c.APIKeyEnv = ""; c.LookupEnv = nil })
	if _, err := keyless.Generate(t.Context(), spec(sonnet), ask("hi")); err != nil {
		t.Fatal(err)
	}
	got := home.recorded()
	if len(got) != 1 || len(elsewhere.recorded()) != 0 {
		t.Fatalf("requests: %d home, %d elsewhere", len(got), len(elsewhere.recorded()))
	}
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Smuggled"} {
		if v := got[0].Header.Get(h); v != "" {
			t.Errorf("%s: %q sent, from the environment", h, v)
		}
	}
}

// TestConfig refuses a configuration it cannot use, naming what is wrong
// and never a key.
func TestConfig(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for _, cfg := range []anthropic.Config{
		{APIKeyEnv: "AID_MISSING_KEY", LookupEnv: none},
		{BaseURL: "ftp://example.com", LookupEnv: none},
		{BaseURL: "://", LookupEnv: none},
	} {
		if _, err := anthropic.New(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		} else if cfg.APIKeyEnv != "" && !strings.Contains(err.Error(), "AID_MISSING_KEY") {
			t.Errorf("%+v: %v does not name the variable", cfg, err)
		}
	}
	if _, err := anthropic.New(anthropic.Config{LookupEnv: none}); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	var _ gateway.Provider = (*anthropic.Provider)(nil)
}
