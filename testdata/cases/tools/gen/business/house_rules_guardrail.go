// Written once by aidgen build for the house_rules guardrail function. This file is yours:
// aidgen never overwrites it.

package business

import (
	"context"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/kind"
)

// HouseRules judges a value for the guardrails house-rules (kind go). It returns a finding
// with Tripped set when the guardrail's action applies, and what matched; an
// error fails the run, since a check that could not be made never lets a value
// through.
func HouseRules(ctx context.Context, v guard.Value) (guard.Finding, error) {
	return guard.Finding{}, &kind.DeferredError{Feature: "guardrail function house_rules"}
}
