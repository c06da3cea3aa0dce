package service

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
)

// TestClassifyCallerErrors checks that errors the caller can fix are 4xx
// answers naming the parameter, not server errors.
func TestClassifyCallerErrors(t *testing.T) {
	for _, tt := range []struct {
		err    error
		status int
		param  string
	}{
		{fmt.Errorf("run r: %w", &agents.UserIDRequiredError{Agent: "triage"}), http.StatusBadRequest, "user"},
		{&gateway.InvalidRequestError{Field: "stop", Rule: "at most 4"}, http.StatusBadRequest, "stop"},
		{&agents.UnknownAgentError{Agent: "x"}, http.StatusNotFound, "model"},
		{&agents.InvalidArgumentsError{RunID: "r", Tool: "refund", Problem: "missing property 'id'"}, http.StatusBadRequest, "arguments"},
		{&agents.UnknownToolError{RunID: "r", Agent: "a", Tool: "wire_money"}, http.StatusConflict, ""},
	} {
		e := classify(tt.err, "req_1", "run_1")
		if e.Status != tt.status || (tt.param == "") != (e.Param == nil) || (e.Param != nil && *e.Param != tt.param) {
			t.Errorf("classify(%v) = status %d param %v, want %d %q", tt.err, e.Status, e.Param, tt.status, tt.param)
		}
	}
}

// TestClassifyBlockedRun answers a run a guardrail blocked with the
// guardrail's declared message only: not its name, nor what it matched.
func TestClassifyBlockedRun(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &agents.BlockedError{RunID: "run_1", Guardrail: "no-injection", Point: agents.PointInput, Message: "This request cannot be processed."})
	e := classify(err, "req_1", "run_1")
	if e.Status != http.StatusBadRequest || e.Code != CodeGuardrailBlocked || e.Message != "This request cannot be processed." {
		t.Fatalf("classify = %d %s %q", e.Status, e.Code, e.Message)
	}
}
