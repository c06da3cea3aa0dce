package ir_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestLinksNoRuntime keeps ir off the runtime: it reads the runtime's
// rules (runtime/rules), its kinds' names (runtime/kind), two packages of
// the standard library alone, the approval policy's compiler
// (runtime/agents/policy) with its condition language (CEL,
// runtime/agents/policy/cel) and the guardrails' (runtime/agents/guard,
// with the JSON Schema compiler it shares, runtime/internal/jsonschemas),
// and the file patterns retriever sources share with the runtime
// (runtime/fileglob), the skills' parser (runtime/agents/skill), and the
// eval dataset format, for the fields a prompt template is rendered with
// (runtime/eval/dataset, which places its errors with
// runtime/internal/jsonpos) — and nothing that links a provider SDK, a
// database driver or OpenTelemetry.
func TestLinksNoRuntime(t *testing.T) {
	reads := []string{
		"github.com/aidgen/aid/runtime/kind",
		"github.com/aidgen/aid/runtime/rules",
		"github.com/aidgen/aid/runtime/agents/policy",
		"github.com/aidgen/aid/runtime/agents/policy/cel",
		"github.com/aidgen/aid/runtime/agents/guard",
		"github.com/aidgen/aid/runtime/internal/jsonschemas",
		"github.com/aidgen/aid/runtime/fileglob",
		"github.com/aidgen/aid/runtime/agents/skill",
		"github.com/aidgen/aid/runtime/eval/dataset",
		"github.com/aidgen/aid/runtime/internal/jsonpos",
	}
	for _, dep := range depcheck.Deps(t, "github.com/aidgen/aid/ir") {
		switch {
		case strings.HasPrefix(dep, "github.com/aidgen/aid/runtime/") && !slices.Contains(reads, dep),
			strings.HasPrefix(dep, "github.com/openai/"), strings.HasPrefix(dep, "github.com/jackc/"), strings.HasPrefix(dep, "go.opentelemetry.io/"):
			t.Errorf("ir links %s", dep)
		}
	}
}
