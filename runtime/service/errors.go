package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
)

// The error types of the OpenAI error shape: the category a client branches
// on.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypeNotFound       = "not_found_error"
	TypeConflict       = "conflict_error"
	TypeQuota          = "insufficient_quota"
	TypeServer         = "server_error"
	TypeUnavailable    = "service_unavailable"
)

// The stable error codes. Each has one HTTP status, listed with it.
const (
	// CodeInvalidJSON (400): the body is not the JSON the route reads.
	CodeInvalidJSON = "invalid_json"
	// CodeInvalidRequest (400): a field is missing or wrong; param names it.
	CodeInvalidRequest = "invalid_request"
	// CodeUnsupportedParameter (400): a field the service refuses (client
	// tools, n > 1); param names it.
	CodeUnsupportedParameter = "unsupported_parameter"
	// CodeContextLengthExceeded (400): the conversation does not fit the
	// agent's model.
	CodeContextLengthExceeded = "context_length_exceeded"
	// CodeBodyTooLarge (413): the body exceeds Limits.MaxBodyBytes.
	CodeBodyTooLarge = "body_too_large"
	// CodeMissingAPIKey (401): no bearer token.
	CodeMissingAPIKey = "missing_api_key"
	// CodeInvalidAPIKey (401): a bearer token that is not accepted.
	CodeInvalidAPIKey = "invalid_api_key"
	// CodeModelNotFound (404): no agent by that name.
	CodeModelNotFound = "model_not_found"
	// CodeRunNotFound (404): no run by that id.
	CodeRunNotFound = "run_not_found"
	// CodeRetrieverNotFound (404): no retriever by that name.
	CodeRetrieverNotFound = "retriever_not_found"
	// CodeRouteNotFound (404): no such route.
	CodeRouteNotFound = "route_not_found"
	// CodeRunNotPaused (409): a resume of a run that waits for no decision.
	CodeRunNotPaused = "run_not_paused"
	// CodeRunConflict (409): another resume of the run won.
	CodeRunConflict = "run_conflict"
	// CodeBudgetExceeded (402): a budget refused the run's next call.
	CodeBudgetExceeded = "budget_exceeded"
	// CodeMaxSteps (500): the agent used its steps without an answer.
	CodeMaxSteps = "max_steps_exceeded"
	// CodeInvalidOutput (502): the model's answer did not match the agent's
	// output schema.
	CodeInvalidOutput = "invalid_model_output"
	// CodeUpstream (502): the model provider failed, after retries and
	// fallbacks.
	CodeUpstream = "upstream_error"
	// CodeTimeout (504): the request ran out of Limits.RequestTimeout.
	CodeTimeout = "timeout"
	// CodeShuttingDown (503): the service is draining; for a run it
	// interrupted, the message names the run, which stays recoverable.
	CodeShuttingDown = "shutting_down"
	// CodeNotReady (503): a readiness check failed.
	CodeNotReady = "not_ready"
	// CodeServer (500): anything else.
	CodeServer = "server_error"
)

// apiError is an error answer: an HTTP status and the OpenAI error object.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, typ, code, msg string) *apiError {
	return &apiError{Status: status, Type: typ, Code: code, Message: msg}
}

func invalid(code, param, msg string) *apiError {
	e := newError(http.StatusBadRequest, TypeInvalidRequest, code, msg)
	if param != "" {
		e.Param = &param
	}
	return e
}

// errorBody is the JSON of an error answer, with aid's extension when a run
// was started.
type errorBody struct {
	Error *apiError `json:"error"`
	Aid   *aidExt   `json:"aid,omitempty"`
}

// classify maps an error of the runtime to its answer. The message is the
// error's text: runtime errors name what failed and never carry credentials.
func classify(err error) *apiError {
	var (
		ae        *apiError
		unknown   *agents.UnknownAgentError
		notFound  *agents.RunNotFoundError
		notPaused *agents.NotPausedError
		conflict  *agents.ConflictError
		stale     *agents.StaleCheckpointError
		budget    *gateway.BudgetExceededError
		window    *gateway.ContextWindowExceededError
		maxSteps  *agents.MaxStepsError
		output    *agents.OutputValidationError
		invalidRq *gateway.InvalidRequestError
		noUser    *agents.UserIDRequiredError
		provider  *gateway.ProviderError
		caps      *gateway.CapabilityMismatchError
	)
	msg := err.Error()
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &unknown):
		e := newError(http.StatusNotFound, TypeNotFound, CodeModelNotFound, msg)
		p := "model"
		e.Param = &p
		return e
	case errors.As(err, &notFound):
		return newError(http.StatusNotFound, TypeNotFound, CodeRunNotFound, msg)
	case errors.As(err, &notPaused):
		return newError(http.StatusConflict, TypeConflict, CodeRunNotPaused, msg)
	case errors.As(err, &conflict), errors.As(err, &stale):
		return newError(http.StatusConflict, TypeConflict, CodeRunConflict, msg)
	case errors.As(err, &budget):
		return newError(http.StatusPaymentRequired, TypeQuota, CodeBudgetExceeded, msg)
	case errors.As(err, &window):
		e := invalid(CodeContextLengthExceeded, "messages", msg)
		return e
	case errors.As(err, &maxSteps):
		return newError(http.StatusInternalServerError, TypeServer, CodeMaxSteps, msg)
	case errors.As(err, &output):
		return newError(http.StatusBadGateway, TypeServer, CodeInvalidOutput, msg)
	case errors.As(err, &invalidRq):
		return invalid(CodeInvalidRequest, invalidRq.Field, msg)
	case errors.As(err, &caps):
		// A call on an exposed alias asked for what its model cannot do.
		return invalid(CodeUnsupportedParameter, capabilityParam(caps), msg)
	case errors.As(err, &noUser):
		return invalid(CodeInvalidRequest, "user", fmt.Sprintf("agent %q keeps memory per user: name the user (user in chat completions, user_id in runs)", noUser.Agent))
	case errors.Is(err, agents.ErrInterrupted):
		// Before the cancellation cases: the run's error may also wrap
		// context.Canceled, and this one is not the run's end.
		return newError(http.StatusServiceUnavailable, TypeUnavailable, CodeShuttingDown, msg)
	case errors.Is(err, context.DeadlineExceeded):
		return newError(http.StatusGatewayTimeout, TypeServer, CodeTimeout, msg)
	case errors.Is(err, context.Canceled):
		return newError(http.StatusServiceUnavailable, TypeUnavailable, CodeShuttingDown, msg)
	case errors.As(err, &provider):
		return newError(http.StatusBadGateway, TypeServer, CodeUpstream, msg)
	default:
		return newError(http.StatusInternalServerError, TypeServer, CodeServer, msg)
	}
}

// capabilityParam names the request field that needs the first capability
// a model lacks.
func capabilityParam(e *gateway.CapabilityMismatchError) string {
	missing := append(slices.Clone(e.MissingInModel), e.MissingInProvider...)
	if len(missing) > 0 {
		switch missing[0] {
		case gateway.CapabilityTools:
			return "tools"
		case gateway.CapabilityJSON:
			return "response_format"
		case gateway.CapabilityStreaming:
			return "stream"
		}
	}
	return "model"
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the client may be gone; nothing else to tell it
}

// noRetry tells OpenAI clients not to retry an error answer (they retry
// 409, 429 and 5xx on their own): the gateway already retried the provider,
// and a run that failed would only run, and spend, again. A 503 (draining,
// not ready) may be retried, on another replica.
func noRetry(w http.ResponseWriter, ae *apiError) {
	if ae.Status != http.StatusServiceUnavailable {
		w.Header().Set("X-Should-Retry", "false")
	}
}

// writeError writes err in the OpenAI error shape.
func writeError(w http.ResponseWriter, err error, ext *aidExt) *apiError {
	ae := classify(err)
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="aid"`)
	}
	noRetry(w, ae)
	writeJSON(w, ae.Status, errorBody{Error: ae, Aid: ext})
	return ae
}

// decodeBody reads a JSON body into v, refusing unknown fields only when
// strict, trailing data and a body over the limit.
func decodeBody(r *http.Request, v any, strict bool) error {
	dec := json.NewDecoder(r.Body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return newError(http.StatusRequestEntityTooLarge, TypeInvalidRequest, CodeBodyTooLarge,
				fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
		}
		return invalid(CodeInvalidJSON, "", "request body is not valid JSON for this route: "+err.Error())
	}
	if dec.More() {
		return invalid(CodeInvalidJSON, "", "request body has data after the JSON value")
	}
	return nil
}

// asErr is errors.As, for brevity where a type switch is not.
func asErr[T error](err error, target *T) bool {
	return err != nil && errors.As(err, target)
}
