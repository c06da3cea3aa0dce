package gateway

import "context"

// CallInfo says which step of which agent a model call is. The agent
// runtime puts it on the context of every model call, so that providers that
// play a script per agent (the fake's agent scripts) can pick the step by
// its key rather than by arrival order, which concurrent runs would make
// nondeterministic. Real providers ignore it.
type CallInfo struct {
	// Agent is the name of the agent making the call.
	Agent string
	// Step numbers the agent's model calls in its current turn, from 1. A
	// turn starts when a run starts with the agent, when the conversation
	// is transferred to it, or when another agent delegates a task to it;
	// every model call of the turn (a repair of invalid structured output
	// included) takes the next number. Retries of the same call (the
	// gateway's fallbacks, a degrade after a budget breach) keep the number,
	// and a resumed run continues the numbering where it paused.
	Step int
	// RunID is the top-level run the call belongs to; delegated runs carry
	// the id of the run that started them.
	RunID string
	// Compaction marks a call that summarises the oldest part of an
	// agent's thread (the agents' compaction) rather than one that takes
	// a step: a fake provider without a script for the call answers it
	// with its summariser.
	Compaction bool
}

type callInfoCtxKey struct{}

// WithCallInfo returns a context that carries the agent step being called.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoCtxKey{}, ci)
}

// CallInfoFromContext returns the call info put on ctx by WithCallInfo.
func CallInfoFromContext(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoCtxKey{}).(CallInfo)
	return ci, ok
}
