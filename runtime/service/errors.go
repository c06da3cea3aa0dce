package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/aidgen/aid/runtime/kind"
)

// The error types of the OpenAI error shape: the category a client branches
// on.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeConflict       = "conflict_error"
	TypeQuota          = "insufficient_quota"
	TypeRateLimit      = "rate_limit_error"
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
	// CodeInsufficientRole (403): a key without the role the route needs;
	// the message names the key and the roles that may.
	CodeInsufficientRole = "insufficient_role"
	// CodeHostNotAllowed (403): a Host the service does not answer to
	// (Config.AllowedHosts), on any route.
	CodeHostNotAllowed = "host_not_allowed"
	// CodeOriginNotAllowed (403): an MCP request from a browser page of an
	// origin the service does not allow (Config.AllowedOrigins).
	CodeOriginNotAllowed = "origin_not_allowed"
	// CodeModelNotFound (404): no agent by that name.
	CodeModelNotFound = "model_not_found"
	// CodeRunNotFound (404): no run by that id.
	CodeRunNotFound = "run_not_found"
	// CodeResponseNotFound (404): no response by that id (a response of an
	// exposed alias is not stored; one deleted is gone).
	CodeResponseNotFound = "response_not_found"
	// CodeResponsePaused (409): previous_response_id names a response
	// that waits for approval of a call; it can be continued once an
	// approver has decided.
	CodeResponsePaused = "response_paused"
	// CodeResponseInProgress (409): the response named has not ended (a
	// continuation, a delete).
	CodeResponseInProgress = "response_in_progress"
	// CodeRetrieverNotFound (404): no retriever by that name.
	CodeRetrieverNotFound = "retriever_not_found"
	// CodeRouteNotFound (404): no such route.
	CodeRouteNotFound = "route_not_found"
	// CodeMethodNotAllowed (405): the route exists under other methods,
	// which the Allow header lists.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeRunNotPaused (409): a resume of a run that waits for no decision.
	CodeRunNotPaused = "run_not_paused"
	// CodeRunNotContinuable (409): a continue of a run that did not stop
	// early (max_steps, timed_out, cancelled).
	CodeRunNotContinuable = "run_not_continuable"
	// CodeRunNotCancellable (409): a cancel of a run that is neither
	// running nor paused.
	CodeRunNotCancellable = "run_not_cancellable"
	// CodeRunConflict (409): another resume of the run won.
	CodeRunConflict = "run_conflict"
	// CodeRunNotResumable (409): the paused run waits on a tool this
	// service does not have; it stays paused for one that has it.
	CodeRunNotResumable = "run_not_resumable"
	// CodeBudgetExceeded (402): a budget refused the run's next call.
	CodeBudgetExceeded = "budget_exceeded"
	// CodeMaxSteps (500): the agent used its steps without an answer; the
	// run can be continued (POST /v1/runs/{id}/continue).
	CodeMaxSteps = "max_steps_exceeded"
	// CodeRunTimedOut (504): the run exceeded its run or step timeout, or
	// the request's; the answer carries the partial result, and the run
	// can be continued.
	CodeRunTimedOut = "run_timed_out"
	// CodeRunCancelled (409): the run was cancelled (POST
	// /v1/runs/{id}/cancel, from any replica); the answer carries the
	// partial result, and the run can be continued.
	CodeRunCancelled = "run_cancelled"
	// CodeInvalidOutput (502): the model's answer did not match the agent's
	// output schema.
	CodeInvalidOutput = "invalid_model_output"
	// CodeUpstream (502): the model provider failed, after retries and
	// fallbacks.
	CodeUpstream = "upstream_error"
	// CodeTimeout (504): the request ran out of Limits.RequestTimeout.
	CodeTimeout = "timeout"
	// CodeUnavailable (503): a dependency (the run store, the budget
	// ledger, memory, a vector store) cannot be reached; the answer has
	// Retry-After and X-Should-Retry: true, and names no connection detail.
	CodeUnavailable = "dependency_unavailable"
	// CodeShuttingDown (503): the service is draining; for a run it
	// interrupted, the message names the run, which stays recoverable.
	CodeShuttingDown = "shutting_down"
	// CodeQueueFull (429): the queue of background runs holds its
	// maximum of runs waiting for a worker; the answer has Retry-After.
	CodeQueueFull = "queue_full"
	// CodeRateLimited (429): a rate limit of the caller's key or tenant,
	// or a model's quota, refused the call; the answer has Retry-After
	// and OpenAI's x-ratelimit-* headers for the limit that refused.
	CodeRateLimited = "rate_limit_exceeded"
	// CodeNotReady (503): a readiness check failed.
	CodeNotReady = "not_ready"
	// CodeNotImplemented (501): the route needs what this service's
	// configuration lacks (a run store that lists runs).
	CodeNotImplemented = "not_implemented"
	// CodeServer (500): anything else.
	CodeServer = "server_error"
	// CodeGuardrailBlocked (400): a guardrail blocked the run (its
	// status is blocked); the message is the guardrail's declared
	// message, and nothing of what it matched.
	CodeGuardrailBlocked = "guardrail_blocked"
)

// apiError is an error answer: an HTTP status and the OpenAI error object.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
	// cause is the error behind the answer, for the log line only: a
	// client never reads it (see classify).
	cause error
	// retryAfter, when set, is the Retry-After of a 429.
	retryAfter time.Duration
	// rate, when set, is the rate limit that refused, for the
	// x-ratelimit-* headers.
	rate *gateway.RateLimitedError
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

// classify maps an error of the runtime to its answer. A client reads the
// message of the typed error it can act on (an unknown agent, a budget, a
// run that is not paused), never the chain of wrapped errors around it,
// and nothing of an error it cannot act on: a 500 says "internal error"
// with the request's id, which the log line carries with the error itself
// (apiError.cause). reqID is the request's id, runID the run's when one
// started.
func classify(err error, reqID, runID string) *apiError {
	ae := classifyOnly(err, reqID, runID)
	if ae.cause == nil {
		ae.cause = err
	}
	return ae
}

func classifyOnly(err error, reqID, runID string) *apiError {
	var (
		ae          *apiError
		unknown     *agents.UnknownAgentError
		notFound    *agents.RunNotFoundError
		notPaused   *agents.WrongStatusError
		notCont     *agents.NotContinuableError
		notCanc     *agents.NotCancellableError
		conflict    *agents.ConflictError
		stale       *agents.StaleCheckpointError
		budget      *gateway.BudgetExceededError
		rate        *gateway.RateLimitedError
		runBudget   *agents.BudgetExceededError
		window      *gateway.ContextWindowExceededError
		maxSteps    *agents.MaxStepsError
		timedOut    *agents.TimeoutError
		cancelled   *agents.CancelledError
		output      *agents.OutputValidationError
		invalidRq   *gateway.InvalidRequestError
		noUser      *agents.UserIDRequiredError
		badOption   *agents.InvalidOptionError
		provider    *gateway.ProviderError
		badEdit     *agents.InvalidArgumentsError
		noTool      *agents.UnknownToolError
		unavailable *kind.UnavailableError
		caps        *gateway.CapabilityMismatchError
		full        *jobs.FullError
		closed      *jobs.ClosedError
		blocked     *agents.BlockedError
		noListing   *agents.ListingUnsupportedError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &full):
		e := newError(http.StatusTooManyRequests, TypeRateLimit, CodeQueueFull, full.Error())
		e.retryAfter = full.RetryAfter
		return e
	case errors.As(err, &closed):
		return newError(http.StatusServiceUnavailable, TypeUnavailable, CodeShuttingDown, "the service is shutting down and queues no background run; another replica can")
	case errors.As(err, &unavailable):
		// Before the others: whatever was being done, the answer is that
		// a dependency is down, which a retry later may not meet.
		return newError(http.StatusServiceUnavailable, TypeUnavailable, CodeUnavailable,
			fmt.Sprintf("the service's %s is unavailable; try again shortly", unavailable.Dependency))
	case errors.As(err, &noListing):
		return newError(http.StatusNotImplemented, TypeInvalidRequest, CodeNotImplemented, noListing.Error())
	case errors.As(err, &badEdit):
		return invalid(CodeInvalidRequest, "arguments", badEdit.Error())
	case errors.As(err, &noTool):
		return newError(http.StatusConflict, TypeConflict, CodeRunNotResumable, noTool.Error())
	case errors.As(err, &unknown):
		e := newError(http.StatusNotFound, TypeNotFound, CodeModelNotFound, unknown.Error())
		p := "model"
		e.Param = &p
		return e
	case errors.As(err, &notFound):
		return newError(http.StatusNotFound, TypeNotFound, CodeRunNotFound, notFound.Error())
	case errors.As(err, &notPaused):
		return newError(http.StatusConflict, TypeConflict, CodeRunNotPaused, notPaused.Error())
	case errors.As(err, &notCont):
		return newError(http.StatusConflict, TypeConflict, CodeRunNotContinuable, notCont.Error())
	case errors.As(err, &notCanc):
		return newError(http.StatusConflict, TypeConflict, CodeRunNotCancellable, notCanc.Error())
	case errors.As(err, &conflict):
		return newError(http.StatusConflict, TypeConflict, CodeRunConflict, conflict.Error())
	case errors.As(err, &stale):
		return newError(http.StatusConflict, TypeConflict, CodeRunConflict, stale.Error())
	case errors.As(err, &rate):
		e := newError(http.StatusTooManyRequests, TypeRateLimit, CodeRateLimited, rate.Error())
		e.retryAfter, e.rate = rate.RetryAfter, rate
		return e
	case errors.As(err, &runBudget):
		return newError(http.StatusPaymentRequired, TypeQuota, CodeBudgetExceeded, runBudget.Error())
	case errors.As(err, &budget):
		return newError(http.StatusPaymentRequired, TypeQuota, CodeBudgetExceeded, budget.Error())
	case errors.As(err, &window):
		return invalid(CodeContextLengthExceeded, "messages", window.Error())
	case errors.As(err, &blocked):
		return newError(http.StatusBadRequest, TypeInvalidRequest, CodeGuardrailBlocked, blocked.Message)
	case errors.As(err, &maxSteps):
		return newError(http.StatusInternalServerError, TypeServer, CodeMaxSteps, maxSteps.Error())
	case errors.As(err, &timedOut):
		return newError(http.StatusGatewayTimeout, TypeServer, CodeRunTimedOut, timedOut.Error())
	case errors.As(err, &cancelled):
		return newError(http.StatusConflict, TypeConflict, CodeRunCancelled, cancelled.Error())
	case errors.As(err, &output):
		return newError(http.StatusBadGateway, TypeServer, CodeInvalidOutput, output.Error())
	case errors.As(err, &invalidRq):
		return invalid(CodeInvalidRequest, invalidRq.Field, invalidRq.Error())
	case errors.As(err, &badOption):
		return invalid(CodeInvalidRequest, badOption.Option, badOption.Error())
	case errors.As(err, &caps):
		// A call on an exposed alias asked for what its model cannot do.
		return invalid(CodeUnsupportedParameter, capabilityParam(caps), caps.Error())
	case errors.As(err, &noUser):
		return invalid(CodeInvalidRequest, "user", fmt.Sprintf("agent %q keeps memory per user: name the user (user in chat completions, user_id in runs)", noUser.Agent))
	case errors.Is(err, agents.ErrInterrupted):
		// Before the cancellation cases: the run's error may also wrap
		// context.Canceled, and this one is not the run's end.
		return newError(http.StatusServiceUnavailable, TypeUnavailable, CodeShuttingDown,
			fmt.Sprintf("the service is shutting down: run %s was interrupted; it stays running and can be recovered on another replica", runID))
	case errors.Is(err, context.DeadlineExceeded):
		return newError(http.StatusGatewayTimeout, TypeServer, CodeTimeout, "the request ran out of time before the run ended")
	case errors.Is(err, context.Canceled):
		return newError(http.StatusServiceUnavailable, TypeUnavailable, CodeShuttingDown, "the request was cancelled before the run ended")
	case errors.As(err, &provider):
		return newError(http.StatusBadGateway, TypeServer, CodeUpstream, "the model provider failed, after retries and fallbacks: "+providerSummary(provider))
	default:
		return newError(http.StatusInternalServerError, TypeServer, CodeServer, "internal error (request "+reqID+")")
	}
}

// providerSummary says what failed upstream in the provider error's own
// fields: the provider, the model, the status and what went wrong
// (ProviderError.Failure), not the adapter's text, which may quote the
// upstream's body or address.
func providerSummary(e *gateway.ProviderError) string {
	s := "provider " + e.Provider
	if e.Model != "" {
		s += " model " + e.Model
	}
	if e.StatusCode != 0 {
		s += strings.TrimRight(fmt.Sprintf(" answered %d %s", e.StatusCode, http.StatusText(e.StatusCode)), " ")
		if e.Failure == gateway.FailureOverloaded {
			s += ": it is overloaded"
		}
		return s
	}
	switch {
	case e.Timeout:
		s += " timed out"
	case e.Failure == gateway.FailureTooLarge:
		s += " sent an answer too large to read"
	case e.Failure == gateway.FailureOverloaded:
		s += " stopped its answer: it is overloaded"
	case e.Failure == gateway.FailureMalformed:
		s += " sent a malformed answer"
	case e.Failure == gateway.FailureErrorEvent:
		s += " stopped its answer with an error"
	case e.Failure == gateway.FailureUnreachable:
		s += " could not be reached"
	default:
		s += " failed"
	}
	return s
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
	buf := answerBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledAnswer {
			buf.Reset()
			answerBufs.Put(buf)
		}
	}()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		// A value JSON cannot hold (a NaN): a whole 500, as for any failure
		// the client cannot act on, rather than half a body under the
		// status meant for the whole. An error body always encodes.
		writeError(w, fmt.Errorf("encode the answer: %w", err), nil)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client may be gone; nothing else to tell it
}

// answerBufs holds the buffers JSON answers are encoded in, so that an
// answer is sent with its length (not chunked, however long) in one write.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledAnswer is the largest buffer kept for reuse: a long run's record
// does not stay in the pool.
const maxPooledAnswer = 64 << 10

// retryHeaders tell OpenAI clients whether to retry an error answer (they
// retry 409, 429 and 5xx on their own). Most must not be retried: the
// gateway already retried the provider, and a run that failed would only
// run, and spend, again. A 503 may be: the service is draining (another
// replica answers) or a dependency is down (it comes back); one of those
// says after how long.
func retryHeaders(w http.ResponseWriter, ae *apiError) {
	if ae.rate != nil {
		rateHeaders(w.Header(), ae.rate)
	}
	if ae.Status == http.StatusTooManyRequests && ae.retryAfter > 0 {
		// A full queue takes runs again once workers drain it.
		w.Header().Set("X-Should-Retry", "true")
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ae.retryAfter.Seconds()))))
		return
	}
	if ae.Status != http.StatusServiceUnavailable {
		w.Header().Set("X-Should-Retry", "false")
		return
	}
	w.Header().Set("X-Should-Retry", "true")
	if ae.Code == CodeUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
}

// rateHeaders sets OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,
// tokens} headers for each dimension the refusing limit caps; a reset is
// a duration as OpenAI writes it ("1.5s", "6m0s").
func rateHeaders(h http.Header, rl *gateway.RateLimitedError) {
	for _, d := range []struct {
		name string
		st   gateway.RateStatus
	}{{"requests", rl.Requests}, {"tokens", rl.Tokens}} {
		if d.st.Limit == 0 {
			continue
		}
		h.Set("X-Ratelimit-Limit-"+d.name, strconv.FormatInt(d.st.Limit, 10))
		h.Set("X-Ratelimit-Remaining-"+d.name, strconv.FormatInt(d.st.Remaining, 10))
		h.Set("X-Ratelimit-Reset-"+d.name, d.st.Reset.Round(time.Millisecond).String())
	}
}

// RetryAfterSeconds is the Retry-After of a 503 dependency_unavailable: long
// enough for a pool to reconnect to a database that restarted, short
// enough that a client does not give up on a blip.
const RetryAfterSeconds = 2

// writeError writes err in the OpenAI error shape.
func writeError(w http.ResponseWriter, err error, ext *aidExt) *apiError {
	runID := ""
	if ext != nil {
		runID = ext.RunID
	}
	ae := classify(err, w.Header().Get("X-Request-Id"), runID)
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="aid"`)
	}
	retryHeaders(w, ae)
	writeJSON(w, ae.Status, errorBody{Error: ae, Aid: ext})
	return ae
}

// asErr is errors.As, for brevity where a type switch is not.
func asErr[T error](err error, target *T) bool {
	return err != nil && errors.As(err, target)
}
