package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/kind"
)

// UnknownModelAliasError reports an alias that is not in the catalog. The
// gateway never falls back to a provider default for an unknown alias.
type UnknownModelAliasError struct {
	// Alias is the alias asked for.
	Alias string
	// Known lists the catalog's aliases, sorted.
	Known []string
}

// Error implements error.
func (e *UnknownModelAliasError) Error() string {
	return fmt.Sprintf("unknown model alias %q (known: %s)", e.Alias, strings.Join(e.Known, ", "))
}

// CapabilityMismatchError reports that an alias cannot serve a request
// because the model, the provider adapter, or both lack a capability.
type CapabilityMismatchError struct {
	// Alias is the alias checked.
	Alias string
	// Model is the pinned model id behind it.
	Model string
	// Provider is the key of the provider serving the model.
	Provider string
	// MissingInModel lists what the model itself does not declare.
	MissingInModel []Capability
	// MissingInProvider lists what the provider adapter cannot do.
	MissingInProvider []Capability
}

// Error implements error.
func (e *CapabilityMismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "alias %q (model %s) cannot serve the request:", e.Alias, e.Model)
	if len(e.MissingInModel) > 0 {
		fmt.Fprintf(&b, " model lacks %s", joinCaps(e.MissingInModel))
	}
	if len(e.MissingInProvider) > 0 {
		if len(e.MissingInModel) > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " provider %q adapter lacks %s", e.Provider, joinCaps(e.MissingInProvider))
	}
	return b.String()
}

func joinCaps(cs []Capability) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = string(c)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// BudgetDimension names the limit a reservation broke.
type BudgetDimension string

// The budget dimensions.
const (
	// DimensionUSD is the money limit (Budget.MaxUSD).
	DimensionUSD BudgetDimension = "usd"
	// DimensionTokens is the token limit (Budget.MaxTotalTokens).
	DimensionTokens BudgetDimension = "tokens"
)

// BudgetExceededError reports a call refused before it was made, because its
// worst case did not fit in a budget. Spent and Reserved are the figures the
// ledger observed at the moment of refusal, atomically with the check, so
// Spent+Reserved+Requested > Limit holds for Dimension.
type BudgetExceededError struct {
	// Budget is the budget's name.
	Budget string
	// Scope is the budget's scope.
	Scope Scope
	// Key is the scope key (which run or thread); empty for a global budget.
	Key string
	// Dimension is the limit that did not fit.
	Dimension BudgetDimension
	// Limit is the budget's limit; a zero dimension is unlimited.
	Limit Amount
	// Spent is what settled calls have spent.
	Spent Amount
	// Reserved is what calls in flight hold.
	Reserved Amount
	// Requested is the worst case of the refused call.
	Requested Amount
}

// Error implements error.
func (e *BudgetExceededError) Error() string {
	key := e.Key
	if key == "" {
		key = "-"
	}
	if e.Dimension == DimensionTokens {
		return fmt.Sprintf("budget %q (%s %s) exceeded: limit %d tokens, spent %d, reserved %d, requested %d",
			e.Budget, e.Scope, key, e.Limit.Tokens, e.Spent.Tokens, e.Reserved.Tokens, e.Requested.Tokens)
	}
	return fmt.Sprintf("budget %q (%s %s) exceeded: limit $%s, spent $%s, reserved $%s, requested $%s",
		e.Budget, e.Scope, key, e.Limit.usdString(), e.Spent.usdString(), e.Reserved.usdString(), e.Requested.usdString())
}

// ContextWindowExceededError reports a request refused before it was sent
// because it does not fit an alias's context window: its estimated input
// plus the output bound the gateway would send is more than the window (see
// the rule in the package documentation). Nothing was reserved and the
// provider was not called. The call falls back to the next alias, since a
// model with a larger window may serve it.
type ContextWindowExceededError struct {
	// Alias is the alias that cannot take the request.
	Alias string
	// Model is the pinned model id behind it.
	Model string
	// InputTokens is the estimated input (EstimateInputTokens).
	InputTokens int64
	// OutputTokens is the output bound the request would be sent with.
	OutputTokens int64
	// ContextWindow is the model's context window in tokens.
	ContextWindow int
}

// Error implements error.
func (e *ContextWindowExceededError) Error() string {
	return fmt.Sprintf("alias %q (model %s): request needs about %d tokens (%d estimated input + %d output bound), more than the context window of %d",
		e.Alias, e.Model, e.InputTokens+e.OutputTokens, e.InputTokens, e.OutputTokens, e.ContextWindow)
}

// InvalidRequestError reports a request that the OpenAI API specification
// forbids, refused before any reservation or provider call: no provider
// would accept it, so sending it would only cost a round trip. Another
// alias would not fix it, so it never falls back.
type InvalidRequestError struct {
	// Field is the offending part of the request, in the wire format's
	// terms (for example "messages" or "stop").
	Field string
	// Rule is what the specification demands of it and what the request
	// did instead.
	Rule string
}

// Error implements error.
func (e *InvalidRequestError) Error() string {
	return "invalid request: " + e.Field + ": " + e.Rule
}

// ProviderError reports a failed provider call. Provider errors are
// eligible for fallback; the retryable ones are retried first.
type ProviderError struct {
	// Provider is the gen_ai provider name (for example "openai").
	Provider string
	// Model is the model id called.
	Model string
	// StatusCode is the HTTP status, or zero when there was no response.
	StatusCode int
	// Retryable says whether trying the same call again may succeed (rate
	// limits, server errors, timeouts, broken connections).
	Retryable bool
	// Timeout says the attempt ran out of its per-request time.
	Timeout bool
	// RetryAfter is the wait the provider asked for, zero when none.
	RetryAfter time.Duration
	// Failure says what went wrong in words a caller may read, whatever
	// the adapter's cause says; empty when the adapter cannot tell.
	Failure ProviderFailure
	// Err is the underlying cause. Adapters keep credentials out of it.
	Err error
}

// ProviderFailure is what went wrong with a provider call, as a service
// may tell its caller: a category, never the adapter's text, which may
// quote the upstream's body or address.
type ProviderFailure string

// The provider failures.
const (
	// FailureUnreachable is a call that got no answer: the connection
	// was refused, reset or cut short.
	FailureUnreachable ProviderFailure = "unreachable"
	// FailureTooLarge is an answer, or an event of a stream, longer than
	// the adapter reads.
	FailureTooLarge ProviderFailure = "too_large"
	// FailureOverloaded is a provider that said it is overloaded
	// (Anthropic's overloaded_error), in an error answer or an error
	// event of a stream.
	FailureOverloaded ProviderFailure = "overloaded"
	// FailureMalformed is an answer that arrived but that the adapter
	// cannot read: not valid JSON, or content the gateway cannot
	// represent.
	FailureMalformed ProviderFailure = "malformed"
	// FailureErrorEvent is a stream the provider ended with an error event
	// other than overloaded.
	FailureErrorEvent ProviderFailure = "error_event"
)

// Error implements error.
func (e *ProviderError) Error() string {
	var b strings.Builder
	b.WriteString("provider ")
	b.WriteString(e.Provider)
	if e.Model != "" {
		b.WriteString(" model ")
		b.WriteString(e.Model)
	}
	switch {
	case e.StatusCode != 0:
		b.WriteString(": status ")
		b.WriteString(strconv.Itoa(e.StatusCode))
	case e.Timeout:
		b.WriteString(": timeout")
	}
	if e.Retryable {
		b.WriteString(" (retryable)")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error { return e.Err }

// errorType returns the low-cardinality error.type span attribute value.
func (e *ProviderError) errorType() string {
	switch {
	case e.StatusCode != 0:
		return strconv.Itoa(e.StatusCode)
	case e.Timeout:
		return "timeout"
	default:
		return "provider_error"
	}
}

// DeferredError is kind.DeferredError, where it now lives so that every
// layer can return and test for it without importing the gateway.
//
// Deprecated: use kind.DeferredError.
type DeferredError = kind.DeferredError

// UnavailableError is kind.UnavailableError, where it now lives so that
// every layer can return and test for it without importing the gateway.
//
// Deprecated: use kind.UnavailableError.
type UnavailableError = kind.UnavailableError

// CallError reports a call whose every attempt failed, or whose fallback
// chain stopped at an error that may not fall through. Unwrap exposes the
// decisive error first and then each attempt's error, so errors.As finds a
// *BudgetExceededError or *ProviderError whichever attempt raised it.
type CallError struct {
	// Op is "generate", "stream" or "embed".
	Op string
	// Alias is the alias asked for.
	Alias string
	// Attempts lists every try in order.
	Attempts []Attempt
	// Err is the error that ended the call.
	Err error
}

// Error implements error.
func (e *CallError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q: ", e.Op, e.Alias)
	if len(e.Attempts) > 1 {
		fmt.Fprintf(&b, "%d attempts: ", len(e.Attempts))
	}
	b.WriteString(e.Err.Error())
	if len(e.Attempts) > 1 {
		b.WriteString(" (earlier:")
		for i, a := range e.Attempts {
			if a.Err == nil || a.Err == e.Err || i == len(e.Attempts)-1 {
				continue
			}
			fmt.Fprintf(&b, " [%s try %d: %v]", a.Alias, a.Retry, a.Err)
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Unwrap returns the decisive error and then every attempt's error.
func (e *CallError) Unwrap() []error {
	errs := make([]error, 0, len(e.Attempts)+1)
	errs = append(errs, e.Err)
	for _, a := range e.Attempts {
		if a.Err != nil && a.Err != e.Err {
			errs = append(errs, a.Err)
		}
	}
	return errs
}

// IsFallbackEligible is the gateway's fall-through policy: it reports whether
// a failure of one alias lets the call move on to the next fallback. Provider
// errors (HTTP errors, malformed answers, broken streams), per-request
// timeouts and a request too large for the alias's context window do; an
// unknown alias, a capability mismatch, a budget breach, an invalid request,
// a deferred feature and the caller's own cancellation or deadline do not,
// because another alias would not fix them or would spend money the caller
// said not to. For a *CallError it judges the error that ended the call.
func IsFallbackEligible(err error) bool {
	err = decisive(err)
	if err == nil {
		return false
	}
	var (
		budget   *BudgetExceededError
		caps     *CapabilityMismatchError
		unknown  *UnknownModelAliasError
		deferred *kind.DeferredError
	)
	if errors.As(err, &budget) || errors.As(err, &caps) || errors.As(err, &unknown) || errors.As(err, &deferred) {
		return false
	}
	var (
		pe     *ProviderError
		window *ContextWindowExceededError
		rate   *RateLimitedError
		cool   *DeploymentsCoolingError
	)
	if errors.As(err, &cool) {
		return true
	}
	if errors.As(err, &rate) {
		// A model's quota is its deployment's; the caller's own limits
		// hold on every alias.
		return rate.Scope == RateScopeModel
	}
	return errors.As(err, &pe) || errors.As(err, &window)
}

// IsRetryable reports whether the same call may succeed if tried again: a
// *ProviderError marked Retryable. For a *CallError it judges the error that
// ended the call.
func IsRetryable(err error) bool {
	var pe *ProviderError
	return errors.As(decisive(err), &pe) && pe.Retryable
}

// decisive returns the error that ended a call: a *CallError's Err, or err
// itself. Earlier attempts' errors must not decide what the caller does
// next, since the last one may be the caller's own cancellation.
func decisive(err error) error {
	var ce *CallError
	for errors.As(err, &ce) {
		err = ce.Err
	}
	return err
}

// asProviderError turns whatever a provider returned into the error the
// gateway reasons about: typed errors pass through, the caller's own
// cancellation passes through, anything else becomes a non-retryable
// *ProviderError so that an adapter's plain error still falls through.
func asProviderError(ctx context.Context, providerName, model string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	var (
		pe       *ProviderError
		deferred *kind.DeferredError
		caps     *CapabilityMismatchError
	)
	if errors.As(err, &pe) || errors.As(err, &deferred) || errors.As(err, &caps) {
		return err
	}
	return &ProviderError{Provider: providerName, Model: model, Err: err}
}

// errorTypeOf returns the error.type span attribute for err.
func errorTypeOf(err error) string {
	var (
		pe     *ProviderError
		budget *BudgetExceededError
	)
	switch {
	case errors.As(err, &pe):
		return pe.errorType()
	case errors.As(err, &budget):
		return "budget_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	default:
		return "_OTHER"
	}
}
