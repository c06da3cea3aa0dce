// Package fake is a deterministic, keyless gateway.Provider for tests, demos
// and evaluations: the embedded default of aid, so that the first command of
// the README works on a fresh machine without keys or network.
//
// It has four modes, chosen by Config:
//
//   - Scripted (Config.Script or Config.ByModel): each call consumes the next
//     Step — a text, tool calls, an error, a usage, a delay — so that tests
//     of the gateway, agents and everything above them control exactly what
//     the "model" says.
//   - Answer key (Config.AnswerKey): for evaluations. Given each case's
//     expected answer and an accuracy p, it answers correctly with
//     probability p. The coin is seeded by (Config.Seed, case id, sample
//     index), taken from the context (gateway.WithSample) or, for callers
//     without case ids, found by matching the last user message against
//     each case's input; so a committed baseline reproduces exactly while a
//     different seed draws a different sample. A wrong answer is another
//     case's answer, chosen deterministically, so it looks plausible.
//   - Agent scripts (Config.Agents, or a file read by LoadScript): a script
//     per agent, for the agent runtime. The runtime puts the agent and its
//     step number on every model call (gateway.CallInfo), and step n of an
//     agent's turn plays the n-th step of its script, so concurrent runs
//     stay deterministic and one script plays a whole conversation: tool
//     calls, transfers (transfer_to_<agent>), delegations
//     (delegate_to_<agent>), approval-gated calls and the final answer. A
//     step marked Answer answers from the answer key when there is one, so
//     the same script drives an evaluation whose target is an agent. An
//     agent may instead have several conversations (Config.Conversations,
//     or a list of {"when", "steps"} in the file; see LoadScript for the
//     format), selected by the call's input or its eval case: the first
//     that matches plays, one without "when" is the default. One script
//     then plays an approve case and a reject case of the same agent
//     differently. A model guardrail's calls carry the agent name
//     "guardrail:<name>" and step 1 (agents.GuardrailCallAgent), so a
//     script for that name plays its verdicts, and conversations chosen by
//     input play a verdict per message.
//   - Echo (none of these): it answers "echo: " and the last user message.
//
// In every mode, a compaction call (gateway.CallInfo.Compaction: an agent
// summarising the oldest part of its thread) that no agent script answers
// is answered by a deterministic summariser: the request's lines that start
// with Config.SummaryKeep ("FACT:" by default), each once, in order. So a
// conversation that marks its facts keeps them through any number of
// compactions.
//
// In answer-key mode, a request that asks for JSON (an agent with an output
// schema) gets the answer inside a document valid for simple schemas; see
// AnswerDocument for the rule.
//
// Every mode reports plausible usage (the gateway's token estimate of input
// and output, bounded by the request's output limit) so that pricing and
// budgets are exercised, honours a configurable latency that ends early
// when the context does, streams its answer word by word, and embeds texts
// deterministically by feature hashing: seeded hashes of the text's words,
// word pairs and character trigrams are summed into the model's width and
// normalised, so texts sharing words and word stems are near each other and
// a retrieval evaluation on fixtures measures something.
//
// It is also the provider kind fake: Kind is the configuration an
// application names (seed, latency, an answer key read from an eval
// dataset, an agent script file), plain data that a generated service holds
// as a literal; it implements gateway.ProviderKind, reading its files
// through the application's (kind.Env.Files), so a service reads the
// copies it embeds. The answer key is an eval dataset, read with package
// runtime/eval/dataset, which holds the format without the eval itself.
//
// It is not a model: it never reads the question to answer it.
package fake
