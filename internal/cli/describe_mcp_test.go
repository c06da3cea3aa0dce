package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type noteIn struct {
	Text string `json:"text" jsonschema:"the note"`
}

// mcpApp writes an application whose MCP server "notes" is an in-process
// go-sdk server over streamable HTTP, asking for a bearer token from
// NOTES_TOKEN, and returns its path.
func mcpApp(t *testing.T) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "read_note", Description: "Read the note.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return nil, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "write_note", Description: "Write the note."},
		func(context.Context, *sdk.CallToolRequest, noteIn) (*sdk.CallToolResult, any, error) {
			return nil, nil, nil
		})
	return serveMCPApp(t, srv, "t0k")
}

// serveMCPApp serves srv over streamable HTTP, asking for the bearer token
// token from NOTES_TOKEN, and writes an application whose MCP server
// "notes" it is, returning the application's path.
func serveMCPApp(t *testing.T, srv *sdk.Server, token string) string {
	t.Helper()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Setenv("NOTES_TOKEN", token)
	dir := t.TempDir()
	app := `name: "notes"
version: "0.1.0"
providers: fake: {kind: "fake", seed: 0}
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0, capabilities: ["tools"]}
aliases: m: "fake-2024-01-01"
mcpServers: notes: {transport: "http", url: "` + ts.URL + `", bearerTokenEnv: "NOTES_TOKEN"}
mcpServers: gone: {transport: "http", url: "http://127.0.0.1:1/mcp", connectTimeout: "2s"}
`
	path := filepath.Join(dir, "app.cue")
	if err := os.WriteFile(path, []byte(app), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDescribeMCPServer: aidgen describe prints an MCP server's tools, with
// their effects, annotations and schemas, reaching the server as the
// application would (its bearer token from the environment).
func TestDescribeMCPServer(t *testing.T) {
	path := mcpApp(t)
	code, out, errOut := run(t, "describe", path, "mcpServers", "notes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"notes offers 2 tools\n",
		"\nread_note\n  description: Read the note.\n  effects:     read (readOnlyHint)\n  annotations: readOnlyHint: true, idempotentHint: false\n  input:\n",
		"\nwrite_note\n  description: Write the note.\n  effects:     write (no readOnlyHint)\n",
		`"description": "the note"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"describe", path, "mcpServers", "note"}, 2, `note`},
		{[]string{"describe", path, "mcpServers", "gone"}, 1, `MCP server "gone" (http): connecting`},
	} {
		code, _, errOut := run(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, %s; want %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

// TestDescribeRedactsEchoedCredentials: a server that echoes the bearer
// token it was sent in its tools' descriptions, titles and schemas shows
// it in describe's output no more than to the model: redacted.
func TestDescribeRedactsEchoedCredentials(t *testing.T) {
	const token = "sk-live-0123456789abcdef"
	srv := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{
		Name: "leak", Title: "Leak " + token, Description: "Called with Bearer " + token + ".",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"key": map[string]any{"type": "string", "description": "the token, " + token, "default": token},
		}},
		OutputSchema: map[string]any{"type": "object", "description": token},
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return nil, nil })
	path := serveMCPApp(t, srv, token)
	code, out, errOut := run(t, "describe", path, "mcpServers", "notes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, token) || strings.Contains(out, token[:12]) {
		t.Errorf("describe gives the token away:\n%s", out)
	}
	for _, want := range []string{
		"title:       Leak [redacted]",
		"description: Called with Bearer [redacted].",
		`"description": "the token, [redacted]"`,
		`"default": "[redacted]"`,
		`"description": "[redacted]"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
