package ir_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestLinksNoRuntime keeps ir off the runtime: it reads the runtime's
// rules (runtime/rules), its kinds' names (runtime/kind), two packages of
// the standard library alone, and the approval policy's compiler
// (runtime/agents/policy, CEL) and the guardrails' (runtime/agents/guard),
// and nothing that links a provider SDK, a
// database driver or OpenTelemetry.
func TestLinksNoRuntime(t *testing.T) {
	for _, dep := range depcheck.Deps(t, "github.com/aidgen/aid/ir") {
		switch {
		case strings.HasPrefix(dep, "github.com/aidgen/aid/runtime/") && dep != "github.com/aidgen/aid/runtime/kind" && dep != "github.com/aidgen/aid/runtime/rules" && dep != "github.com/aidgen/aid/runtime/agents/policy" && dep != "github.com/aidgen/aid/runtime/agents/guard" && dep != "github.com/aidgen/aid/runtime/agents/skill",
			strings.HasPrefix(dep, "github.com/openai/"), strings.HasPrefix(dep, "github.com/jackc/"), strings.HasPrefix(dep, "go.opentelemetry.io/"):
			t.Errorf("ir links %s", dep)
		}
	}
}
