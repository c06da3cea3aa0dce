package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/internal/oauthtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/kind"
)

// protected is the test server behind the authorization server as, with
// one more tool, whoami, whose description echoes the token the session
// was opened with.
func protected(t *testing.T, as *oauthtest.AS) *oauthtest.Resource {
	t.Helper()
	return oauthtest.Protect(t, as, func(r *http.Request) *sdk.Server {
		srv := newTestServer(nil)
		srv.AddTool(&sdk.Tool{Name: "whoami", Description: "You are " + r.Header.Get("Authorization") + ".", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("you"), nil })
		return srv
	})
}

// oauthEnv is the environment of an application whose server "srv" is s:
// the client secret in CLIENT_SECRET, the state directory dir, and a
// debug log kept in log.
func oauthEnv(t *testing.T, s mcp.Server, as *oauthtest.AS, dir string, log *syncLog) kind.Env {
	t.Helper()
	env := envFor(t, s, func(name string) (string, bool) {
		switch name {
		case "CLIENT_SECRET":
			return as.ClientSecret, true
		case kind.EnvStateDir:
			return dir, true
		}
		return "", false
	})
	if log != nil {
		env.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return env
}

// login signs in to s as `aidgen mcp login` does, the test playing the
// browser: it opens the URL the login prints with open, and returns the
// login's outcome.
func login(t *testing.T, env kind.Env, s mcp.Server, open func(authURL string)) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out := oauthtest.NewURLWriter()
	type result struct {
		path string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		p, err := s.Login(ctx, env, "srv", out)
		done <- result{p, err}
	}()
	select {
	case u := <-out.URLs:
		open(u)
	case r := <-done:
		return r.path, r.err
	}
	r := <-done
	return r.path, r.err
}

// follow is login's browser that consents.
func follow(t *testing.T) func(string) {
	return func(u string) {
		status, body, err := oauthtest.Follow(t.Context(), u)
		if err != nil || status != http.StatusOK || !strings.Contains(body, "Signed in") {
			t.Errorf("following the authorization URL: %d %q %v", status, body, err)
		}
	}
}

func authCodeServer(res *oauthtest.Resource, as *oauthtest.AS) mcp.Server {
	return mcp.Server{Transport: mcp.TransportHTTP, URL: res.URL, OAuth: &mcp.OAuth{AuthorizationCode: &mcp.AuthorizationCode{
		ClientID: as.ClientID, ClientSecretEnv: "CLIENT_SECRET", Scopes: []string{"notes"},
	}}}
}

// TestOAuthClientCredentials: a server declaring client credentials is
// connected with a token its authorization server issued, the endpoints
// discovered from the server's 401; a revoked token is replaced by a new
// grant and the call goes through; a token URL given skips discovery.
func TestOAuthClientCredentials(t *testing.T) {
	as := oauthtest.NewAS(t, time.Hour)
	res := protected(t, as)
	s := mcp.Server{Transport: mcp.TransportHTTP, URL: res.URL, OAuth: &mcp.OAuth{ClientCredentials: &mcp.ClientCredentials{
		ClientID: as.ClientID, ClientSecretEnv: "CLIENT_SECRET", Scopes: []string{"notes"},
	}}}
	env := oauthEnv(t, s, as, t.TempDir(), nil)
	echo := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo"})[0].Implementation
	if obs, err := echo.Call(t.Context(), json.RawMessage(`{"text":"hi"}`)); err != nil || obs != "hi" {
		t.Fatalf("echo = %q, %v", obs, err)
	}
	if n := as.Grants("client_credentials"); n != 1 {
		t.Errorf("%d client-credentials grants, want 1", n)
	}
	if r := as.Resources(); len(r) == 0 || r[0] != res.URL {
		t.Errorf("the resource parameter sent: %q, want %q", r, res.URL)
	}
	if res.Discoveries() == 0 {
		t.Error("the protected-resource metadata was never read")
	}

	as.Revoke()
	if obs, err := echo.Call(t.Context(), json.RawMessage(`{"text":"again"}`)); err != nil || obs != "again" {
		t.Fatalf("after the token was revoked, echo = %q, %v", obs, err)
	}
	if n := as.Grants("client_credentials"); n != 2 {
		t.Errorf("%d client-credentials grants after a revocation, want 2", n)
	}
	// The replacement, accepted since, is replaced in its turn when it is
	// revoked.
	as.Revoke()
	if obs, err := echo.Call(t.Context(), json.RawMessage(`{"text":"third"}`)); err != nil || obs != "third" {
		t.Fatalf("after a second revocation, echo = %q, %v", obs, err)
	}
	if n := as.Grants("client_credentials"); n != 3 {
		t.Errorf("%d client-credentials grants after two revocations, want 3", n)
	}

	// The token URL given: nothing is discovered.
	s.OAuth.ClientCredentials.TokenURL = as.URL + "/token"
	before := res.Discoveries()
	env = oauthEnv(t, s, as, t.TempDir(), nil)
	if obs, err := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo"})[0].Implementation.Call(t.Context(), json.RawMessage(`{"text":"x"}`)); err != nil || obs != "x" {
		t.Fatalf("with a token URL, echo = %q, %v", obs, err)
	}
	if res.Discoveries() != before {
		t.Error("a token URL given, the metadata was read anyway")
	}

	// A wrong secret is an error naming the server, not a hang or a
	// generic failure.
	bad := oauthEnv(t, s, as, t.TempDir(), nil)
	bad.LookupEnv = func(name string) (string, bool) { return "not-the-secret", name == "CLIENT_SECRET" }
	_, err := mcp.Kind{Server: "srv"}.NewTools(t.Context(), agents.Tool{Name: "echo"}, bad)
	var ae *mcp.AuthError
	if !errors.As(err, &ae) || ae.Server != "srv" || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "not-the-secret") {
		t.Errorf("a wrong client secret: %v", err)
	}
}

// TestOAuthLogin: the authorization-code login with PKCE stores the tokens
// encrypted; the server is then reached with them; once they are revoked,
// a call fails with a *LoginRequiredError naming the server and the
// command to run, and so does start-up.
func TestOAuthLogin(t *testing.T) {
	as := oauthtest.NewAS(t, time.Hour)
	res := protected(t, as)
	s := authCodeServer(res, as)
	dir := t.TempDir()
	env := oauthEnv(t, s, as, dir, nil)

	// Before any login, start-up says to sign in.
	_, err := mcp.Kind{Server: "srv"}.NewTools(t.Context(), agents.Tool{Name: "echo"}, env)
	var lr *mcp.LoginRequiredError
	if !errors.As(err, &lr) || lr.Server != "srv" || !strings.Contains(err.Error(), "run `aidgen mcp login srv`") {
		t.Fatalf("before a login: %v", err)
	}

	path, err := login(t, env, s, follow(t))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != filepath.Join(dir, mcp.TokenDirName) {
		t.Errorf("tokens stored at %s, want in %s", path, filepath.Join(dir, mcp.TokenDirName))
	}
	stored, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range as.Issued() {
		if bytes.Contains(stored, []byte(tok)) {
			t.Errorf("the token file holds %q in clear", tok)
		}
	}
	for _, p := range []string{path, filepath.Join(dir, mcp.TokenDirName, "key")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", p, fi.Mode(), err)
		}
	}
	if as.Grants("authorization_code") != 1 {
		t.Errorf("%d authorization-code grants, want 1", as.Grants("authorization_code"))
	}

	env = oauthEnv(t, s, as, dir, nil)
	echo := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo"})[0].Implementation
	if obs, err := echo.Call(t.Context(), json.RawMessage(`{"text":"hi"}`)); err != nil || obs != "hi" {
		t.Fatalf("echo after the login = %q, %v", obs, err)
	}

	as.Revoke()
	_, err = echo.Call(t.Context(), json.RawMessage(`{"text":"hi"}`))
	if !errors.As(err, &lr) || lr.Server != "srv" || !strings.Contains(err.Error(), "aidgen mcp login srv") {
		t.Errorf("a call after the tokens were revoked: %v", err)
	}
	_, err = mcp.Kind{Server: "srv"}.NewTools(t.Context(), agents.Tool{Name: "echo"}, oauthEnv(t, s, as, dir, nil))
	if !errors.As(err, &lr) || lr.Server != "srv" {
		t.Errorf("start-up after the tokens were revoked: %v", err)
	}

	// Another key cannot read the file: the server asks for a login.
	s.OAuth.AuthorizationCode.TokenKeyEnv = "TOKEN_KEY"
	other := oauthEnv(t, s, as, dir, nil)
	other.LookupEnv = func(name string) (string, bool) {
		v, ok := map[string]string{"CLIENT_SECRET": as.ClientSecret, kind.EnvStateDir: dir, "TOKEN_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}[name]
		return v, ok
	}
	_, err = mcp.Kind{Server: "srv"}.NewTools(t.Context(), agents.Tool{Name: "echo"}, other)
	if !errors.As(err, &lr) || !strings.Contains(err.Error(), "does not decrypt") {
		t.Errorf("tokens read with another key: %v", err)
	}
}

// TestOAuthLoginRefusals: a redirect whose state is not the login's is
// refused, and so is a code whose PKCE challenge the verifier does not
// match (here, the challenge a man in the middle swapped); neither stores
// anything.
func TestOAuthLoginRefusals(t *testing.T) {
	as := oauthtest.NewAS(t, time.Hour)
	res := protected(t, as)
	s := authCodeServer(res, as)
	dir := t.TempDir()
	env := oauthEnv(t, s, as, dir, nil)

	_, err := login(t, env, s, func(u string) {
		loc, err := oauthtest.Redirect(t.Context(), u)
		if err != nil {
			t.Error(err)
			return
		}
		q := loc.Query()
		q.Set("state", "forged")
		loc.RawQuery = q.Encode()
		status, _, err := oauthtest.Follow(t.Context(), loc.String())
		if err != nil || status != http.StatusBadRequest {
			t.Errorf("a forged state: %d, %v", status, err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "state") {
		t.Errorf("a login whose redirect has another state: %v", err)
	}
	if as.Grants("authorization_code")+as.Refused("authorization_code") != 0 {
		t.Error("a code with a forged state was exchanged")
	}

	_, err = login(t, env, s, func(u string) {
		q := strings.Index(u, "code_challenge=")
		end := strings.IndexByte(u[q:], '&')
		if end < 0 {
			end = len(u) - q
		}
		swapped := u[:q] + "code_challenge=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU" + u[q+end:]
		status, _, err := oauthtest.Follow(t.Context(), swapped)
		if err != nil || status == http.StatusOK {
			t.Errorf("a swapped challenge: %d, %v", status, err)
		}
	})
	var ae *mcp.AuthError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("a login whose verifier does not match the challenge: %v", err)
	}
	if as.Refused("authorization_code") != 1 || as.Grants("authorization_code") != 0 {
		t.Errorf("the swapped challenge: %d refused, %d granted", as.Refused("authorization_code"), as.Grants("authorization_code"))
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, mcp.TokenDirName)); len(entries) > 1 { // the key file, made before the flow, at most
		t.Errorf("a refused login stored something: %v", entries)
	}
}

// TestOAuthRefresh: a token is replaced before it expires (the server
// would still accept it: the client did not wait for a refusal), by one
// refresh however many calls find it stale at once; the rotated refresh
// token is stored, so that another process refreshes with it.
func TestOAuthRefresh(t *testing.T) {
	as := oauthtest.NewAS(t, 3*time.Second)
	as.SetValidity(time.Hour)
	res := protected(t, as)
	s := authCodeServer(res, as)
	dir := t.TempDir()
	env := oauthEnv(t, s, as, dir, nil)
	if _, err := login(t, env, s, follow(t)); err != nil {
		t.Fatal(err)
	}
	refusals := res.Refusals() // the login's discovery probed the server without a token
	env = oauthEnv(t, s, as, dir, nil)
	echo := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo"})[0].Implementation
	if _, err := echo.Call(t.Context(), json.RawMessage(`{"text":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	if n := as.Grants("refresh_token"); n != 0 {
		t.Errorf("%d refreshes of a token issued a moment ago", n)
	}
	// The token says it lives 3s; the client replaces it when a third of
	// that is left.
	time.Sleep(2200 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			if _, err := echo.Call(t.Context(), json.RawMessage(`{"text":"hi"}`)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := as.Grants("refresh_token"); n != 1 {
		t.Errorf("%d refreshes for 20 calls at once, want 1", n)
	}
	if n := res.Refusals() - refusals; n != 0 {
		t.Errorf("the server refused %d requests: the token was not replaced before it expired", n)
	}
	if seen := res.Seen(); len(seen) != 2 {
		t.Errorf("the server saw %d tokens, want the login's and the refreshed one", len(seen))
	}

	// Another process reads the stored tokens: the rotated refresh token
	// (the login's is no longer good) refreshes again.
	env2 := oauthEnv(t, s, as, dir, nil)
	echo2 := build(t, env2, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo"})[0].Implementation
	time.Sleep(2200 * time.Millisecond)
	if _, err := echo2.Call(t.Context(), json.RawMessage(`{"text":"hi"}`)); err != nil {
		t.Fatalf("another process, after the refresh was rotated: %v", err)
	}
	if n, refused := as.Grants("refresh_token"), as.Refused("refresh_token"); n < 2 || refused != 0 {
		t.Errorf("%d refreshes, %d refused: the rotated refresh token was not stored", n, refused)
	}
}

// TestOAuthTokensNeverShown runs an agent against a server that echoes
// the token it is sent in a tool's description and in a result, refreshes
// it on the way, and looks for every token issued in what the model is
// shown, the run's record, the log and `aidgen describe`'s output.
func TestOAuthTokensNeverShown(t *testing.T) {
	as := oauthtest.NewAS(t, 3*time.Second)
	as.SetValidity(time.Hour)
	res := protected(t, as)
	s := authCodeServer(res, as)
	dir := t.TempDir()
	if _, err := login(t, oauthEnv(t, s, as, dir, nil), s, follow(t)); err != nil {
		t.Fatal(err)
	}
	var log syncLog
	lookup := func(name string) (string, bool) {
		v, ok := map[string]string{"CLIENT_SECRET": as.ClientSecret, kind.EnvStateDir: dir}[name]
		return v, ok
	}
	desc := desk(t, s)
	desc.Tools = append(desc.Tools,
		app.Tool{Decl: agents.Tool{Name: "headers"}, Kind: mcp.Kind{Server: "srv"}},
		app.Tool{Decl: agents.Tool{Name: "whoami"}, Kind: mcp.Kind{Server: "srv"}})
	desc.Agents[0].Tools = append(desc.Agents[0].Tools, "headers", "whoami")
	script := `{"agents": {"desk": [
		{"toolCalls": [{"name": "headers", "arguments": {"as": "result"}}]},
		{"toolCalls": [{"name": "headers", "arguments": {"as": "error"}}, {"name": "whoami", "arguments": {}}]},
		{"answer": true, "text": "done"}
	]}}`
	if err := os.WriteFile(filepath.Join(desc.Dir, "script.json"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := app.Assemble(t.Context(), desc, app.Options{LookupEnv: lookup, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	time.Sleep(2200 * time.Millisecond) // the run's calls refresh the token
	var events bytes.Buffer
	run, err := a.Agents.Run(t.Context(), "desk", "Who am I?", agents.RunOptions{OnEvent: func(ev agents.Event) {
		b, _ := json.Marshal(ev)
		events.Write(b)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if as.Grants("refresh_token") == 0 {
		t.Error("the run refreshed no token: the test shows less than it says")
	}
	record, _ := json.Marshal(run)
	var described bytes.Buffer
	if err := app.Describe(t.Context(), desc, app.Options{LookupEnv: lookup, Logger: logger}, "mcpServers", "srv", &described); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(described.String(), "You are Bearer [redacted].") || !strings.Contains(string(record), "Authorization: Bearer [redacted]") {
		t.Errorf("the echoes are not there, redacted: %s\n%s", described.String(), record)
	}
	shown := map[string]string{
		"the run's record": string(record), "its events": events.String(), "the log": log.String(), "describe": described.String(),
		"the model's tools": strings.Join(a.Agents.Tools("desk"), " "),
	}
	for _, tok := range as.Issued() {
		for where, text := range shown {
			if strings.Contains(text, tok) {
				t.Errorf("%s shows the token %q", where, tok)
			}
		}
	}
}
