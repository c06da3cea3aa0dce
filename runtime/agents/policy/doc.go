// Package policy decides whether a tool call may run: allow it, deny it
// (the model is told why), or ask a person. It holds the one rule of
// approval policies, which the agent runtime applies to every call of a
// declared tool and aidgen vet checks, adding positions: the runtime
// compiles a Policy when it is built (Compile) and decides each call with
// it (Compiled.Decide); the ir package calls Check on an application's
// policy and reports each Problem at its place in the file.
//
// # Semantics
//
// A Policy is an ordered list of Rules and a Default. A rule matches a call
// when its Tool, a tool name or a glob (path.Match: *, ?, [...]), matches
// the called tool's name, or the name of the declaration the tool was
// imported from (Tool.From: "fs" governs fs_write_file, imported from an
// MCP server with the prefix "fs_"), and its When condition, if it has
// one, holds for the call. The first rule that matches decides. When none does, the
// tool's own approval shorthand decides ("always" asks, "never" allows),
// and a tool without one takes the Default (allow when empty). Rules
// govern the application's declared tools; the tools the runtime makes
// for handoffs, delegates and retrievers are not subject to them.
//
// A condition is a CEL expression of type bool, compiled by the Language
// given to Compile (package policy/cel's, over cel.dev/cel-go; this package
// does not link CEL, so that a program whose policy and guardrails have no
// condition does not either), over the variables tool (string, the tool's name), args (map(string, dyn), the
// call's JSON arguments: numbers are doubles, compared with ints as
// numbers), agent (string, the calling agent), user and thread (strings,
// the run's user and thread ids; empty when the run has none). For
// example: args.amount_usd > 100, has(args.note) && args.note.size() > 0,
// agent == "billing". A condition that fails to evaluate (a missing key
// without has(), a type error, the cost limit) denies the call, saying
// why: a policy never allows a call it could not judge.
//
// # Checks
//
// Check and Compile refuse, each a Problem naming the rule and field: an
// action other than allow, deny or ask; a malformed glob; a glob or name
// that matches no tool (unless a declaration's tools are not known until
// the application starts: Tool.Unlisted); a condition that does not compile or is not a
// bool, or that has no Language to compile it (NoLanguageError); a rule shadowed by an earlier one without a condition (or with
// the same condition) that matches every tool it matches, so that it can
// never decide; and a tool's approval shorthand that no call can reach
// because an earlier rule without a condition decides every call of the
// tool.
//
// What it is not: it does not pause runs, keep decisions or grants, or know
// about people; the agent runtime does (see package agents).
package policy
