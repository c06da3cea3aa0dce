package policy_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestLinksLittle keeps the policy package small enough for the ir
// package to import, so that aidgen vet checks policies with the runtime's
// own rule: it links no model client, database driver, OpenTelemetry or
// agents runtime, nor CEL: the condition language is package policy/cel's,
// linked only by a program whose policy or guardrails have conditions.
// (ir's own test holds what ir links.)
func TestLinksLittle(t *testing.T) {
	for _, dep := range depcheck.Deps(t, "github.com/aidgen/aid/runtime/agents/policy") {
		for _, b := range []string{"github.com/openai/openai-go", "github.com/jackc/pgx", "go.opentelemetry.io/otel", "github.com/aidgen/aid/runtime/agents", "cel.dev/", "github.com/google/cel-go"} {
			if strings.HasPrefix(dep, b) && dep != "github.com/aidgen/aid/runtime/agents/policy" {
				t.Errorf("the policy links %s", dep)
			}
		}
	}
}
