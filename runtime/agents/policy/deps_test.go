package policy_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestIRLinksOnlyThePolicy keeps the policy package small enough for the
// ir package to import, so that aidgen vet checks policies with the
// runtime's own rule: neither it nor ir may link a model client, the
// database driver or OpenTelemetry, nor may the policy link the agents
// runtime.
func TestIRLinksOnlyThePolicy(t *testing.T) {
	for _, pkg := range []string{"github.com/aidgen/aid/runtime/agents/policy", "github.com/aidgen/aid/ir"} {
		for _, dep := range depcheck.Deps(t, pkg) {
			for _, banned := range []string{"github.com/openai/openai-go", "github.com/jackc/pgx", "go.opentelemetry.io/otel", "github.com/aidgen/aid/runtime/agents"} {
				if strings.HasPrefix(dep, banned) && dep != "github.com/aidgen/aid/runtime/agents/policy" {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}
