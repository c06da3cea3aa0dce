package lower_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
)

// TestObservationBoundsAgree feeds maxObservationBytes at and around its
// bounds through ir (aidgen vet) and through lowering and app.Assemble
// (the runtime's check), and requires them to agree and the value to reach
// the runtime's tool. The bounds are written in schema.cue and in
// runtime/agents, because ir never imports the runtime; this test keeps
// them one rule.
func TestObservationBoundsAgree(t *testing.T) {
	for _, n := range []int{1, agents.MinObservationBytes - 1, agents.MinObservationBytes, 4096, agents.MaxObservationBytesLimit, agents.MaxObservationBytesLimit + 1} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			src := fmt.Sprintf(`name: "x", version: "1.0.0"
providers: p: kind: "fake"
models: "m-1": {provider: "p", contextWindow: 1000, maxOutputTokens: 10, cost: inputPer1kUSD: 0, capabilities: ["tools"]}
aliases: m: "m-1"
tools: t: {description: "d", maxObservationBytes: %d}
agents: a: {model: "m", instructions: "i", tools: ["t"]}
`, n)
			runtimeOK := n >= agents.MinObservationBytes && n <= agents.MaxObservationBytesLimit
			doc, err := ir.LoadBytes(filepath.Join(t.TempDir(), "app.cue"), []byte(src))
			if err != nil {
				if _, invalid := ir.IsInvalid(err); !invalid {
					t.Fatalf("ir.LoadBytes: %v", err)
				}
				if runtimeOK {
					t.Errorf("ir refuses %d, which the runtime accepts: %v", n, err)
				}
				return
			}
			if !runtimeOK {
				t.Fatalf("ir accepts %d, which the runtime refuses", n)
			}
			a, err := tryAssemble(doc, app.Options{Implementations: map[string]agents.Implementation{"t": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "", nil })}})
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Description().Tools[0].Decl.MaxObservationBytes; got != n {
				t.Errorf("the runtime's tool has MaxObservationBytes %d, want %d", got, n)
			}
		})
	}
}
