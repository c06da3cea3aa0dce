package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/kind"
)

// Describe writes the tools the server offers, connecting to it as the
// application would (its command and environment, or its URL and
// headers, from env), then disconnecting: each tool's description, the
// effects a tool of kind mcp gets when the IR states none, its
// annotations, and its input and output schemas, with the credentials
// sent to the server redacted as in the model's copy. It is what
// `aidgen describe FILE mcpServers NAME`
// prints, so that writing the IR starts from what the server offers.
func (s Server) Describe(ctx context.Context, env kind.Env, name string, w io.Writer) error {
	tools, err := s.tools(ctx, name, env)
	if err != nil {
		return err
	}
	n := "tools"
	if len(tools) == 1 {
		n = "tool"
	}
	fmt.Fprintf(w, "%s offers %d %s\n", name, len(tools), n)
	for _, t := range tools {
		describeTool(w, t)
	}
	return nil
}

// tools connects to the server, reads its tools, sorted, and disconnects.
func (s Server) tools(ctx context.Context, name string, env kind.Env) ([]*sdk.Tool, error) {
	c, err := dial(ctx, name, s, env)
	if err != nil {
		return nil, err
	}
	tools := c.startTools()
	if err := c.close(); err != nil {
		return nil, err
	}
	out := make([]*sdk.Tool, 0, len(tools))
	for _, n := range slices.Sorted(maps.Keys(tools)) {
		out = append(out, tools[n])
	}
	return out, nil
}

// describeTool writes one tool: name and description, effects,
// annotations, schemas.
func describeTool(w io.Writer, t *sdk.Tool) {
	fmt.Fprintf(w, "\n%s\n", t.Name)
	if t.Title != "" {
		fmt.Fprintf(w, "  title:       %s\n", t.Title)
	}
	if d := strings.TrimSpace(t.Description); d != "" {
		fmt.Fprintf(w, "  description: %s\n", strings.Join(strings.Fields(d), " "))
	}
	effects := "write (no readOnlyHint)"
	if EffectsOf(t) == "read" {
		effects = "read (readOnlyHint)"
	}
	fmt.Fprintf(w, "  effects:     %s\n", effects)
	if a := t.Annotations; a != nil {
		var hints []string
		hint := func(name string, v bool) { hints = append(hints, fmt.Sprintf("%s: %v", name, v)) }
		hint("readOnlyHint", a.ReadOnlyHint)
		if a.DestructiveHint != nil {
			hint("destructiveHint", *a.DestructiveHint)
		}
		hint("idempotentHint", a.IdempotentHint)
		if a.OpenWorldHint != nil {
			hint("openWorldHint", *a.OpenWorldHint)
		}
		fmt.Fprintf(w, "  annotations: %s\n", strings.Join(hints, ", "))
	}
	describeSchema(w, "input", t.InputSchema)
	if t.OutputSchema != nil {
		describeSchema(w, "output", t.OutputSchema)
	}
}

// describeSchema writes a JSON Schema indented under its label.
func describeSchema(w io.Writer, label string, schema any) {
	b, err := json.MarshalIndent(schema, "    ", "  ")
	if err != nil {
		fmt.Fprintf(w, "  %s: (not JSON: %v)\n", label, err)
		return
	}
	fmt.Fprintf(w, "  %s:\n    %s\n", label, b)
}
