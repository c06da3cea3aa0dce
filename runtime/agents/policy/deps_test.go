package policy_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestIRLinksOnlyThePolicy keeps the policy package small enough for the
// ir package to import, so that aidgen vet checks policies with the
// runtime's own rule: the policy links no model client, database driver,
// OpenTelemetry or agents runtime, and ir links no model client, database
// driver or agents runtime other than the policy. (ir links OpenTelemetry
// through runtime/retrieval, whose ranking rule it calls.)
func TestIRLinksOnlyThePolicy(t *testing.T) {
	banned := map[string][]string{
		"github.com/aidgen/aid/runtime/agents/policy": {"github.com/openai/openai-go", "github.com/jackc/pgx", "go.opentelemetry.io/otel", "github.com/aidgen/aid/runtime/agents"},
		"github.com/aidgen/aid/ir":                    {"github.com/openai/openai-go", "github.com/jackc/pgx", "github.com/aidgen/aid/runtime/agents"},
	}
	for pkg, prefixes := range banned {
		for _, dep := range depcheck.Deps(t, pkg) {
			for _, b := range prefixes {
				if strings.HasPrefix(dep, b) && dep != "github.com/aidgen/aid/runtime/agents/policy" {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}
