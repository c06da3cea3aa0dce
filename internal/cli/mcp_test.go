package cli_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/oauthtest"
	"github.com/aidgen/aid/runtime/kind"
)

// TestMCPLogin drives `aidgen mcp login` as a user would: it follows the
// URL the command prints to the test's authorization server, which
// redirects to the command's loopback listener; the command exchanges the
// code (with its PKCE verifier) and stores the tokens; `aidgen describe`
// then reaches the server with them, and shows the token the server
// echoes redacted.
func TestMCPLogin(t *testing.T) {
	as := oauthtest.NewAS(t, time.Hour)
	res := oauthtest.Protect(t, as, func(r *http.Request) *sdk.Server {
		srv := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1"}, nil)
		srv.AddTool(&sdk.Tool{Name: "whoami", Description: "You are " + r.Header.Get("Authorization") + ".", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return nil, nil })
		return srv
	})
	state := t.TempDir()
	t.Setenv(kind.EnvStateDir, state)
	t.Setenv("NOTES_CLIENT_SECRET", as.ClientSecret)
	dir := t.TempDir()
	path := filepath.Join(dir, "app.cue")
	app := `name: "notes"
version: "0.1.0"
providers: fake: {kind: "fake", seed: 0}
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0, capabilities: ["tools"]}
aliases: m: "fake-2024-01-01"
mcpServers: notes: {transport: "http", url: "` + res.URL + `", oauth: authorizationCode: {clientId: "` + as.ClientID + `", clientSecretEnv: "NOTES_CLIENT_SECRET", scopes: ["notes"]}}
mcpServers: plain: {transport: "http", url: "` + res.URL + `"}
`
	if err := os.WriteFile(path, []byte(app), 0o644); err != nil {
		t.Fatal(err)
	}

	out := oauthtest.NewURLWriter()
	var errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- cli.MainContext(ctx, []string{"mcp", "login", path, "notes"}, nil, out, &errOut) }()
	select {
	case u := <-out.URLs:
		status, body, err := oauthtest.Follow(ctx, u)
		if err != nil || status != http.StatusOK {
			t.Fatalf("following %s: %d %s %v", u, status, body, err)
		}
	case c := <-code:
		t.Fatalf("mcp login exited %d before printing a URL: %s%s", c, out.String(), errOut.String())
	}
	if c := <-code; c != cli.ExitOK {
		t.Fatalf("mcp login: exit %d: %s%s", c, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "Signed in to MCP server notes; its tokens are stored encrypted in "+filepath.Join(state, "mcp-oauth")) {
		t.Errorf("mcp login printed: %s", out.String())
	}

	var described, describeErr bytes.Buffer
	if c := cli.MainContext(t.Context(), []string{"describe", path, "mcpServers", "notes"}, nil, &described, &describeErr); c != cli.ExitOK {
		t.Fatalf("describe after the login: exit %d: %s", c, describeErr.String())
	}
	if !strings.Contains(described.String(), "You are Bearer [redacted].") {
		t.Errorf("describe: %s", described.String())
	}
	everything := out.String() + errOut.String() + described.String() + describeErr.String()
	for _, tok := range as.Issued() {
		if strings.Contains(everything, tok) {
			t.Errorf("the commands' output shows the token %q", tok)
		}
	}

	// A server without an authorization-code grant, or none at all, is a
	// usage error.
	for _, name := range []string{"plain", "nope"} {
		var o, e bytes.Buffer
		if c := cli.MainContext(t.Context(), []string{"mcp", "login", path, name}, nil, &o, &e); c != cli.ExitUsage || !strings.Contains(e.String(), name) {
			t.Errorf("mcp login %s: exit %d: %s", name, c, e.String())
		}
	}
}
