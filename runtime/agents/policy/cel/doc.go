// Package cel is the condition language of approval rules and guardrails:
// CEL (cel.dev/cel-go). Language implements policy.Language; a program
// passes it where conditions are compiled (app.Description.Conditions,
// agents.Config.Conditions, guard.Deps.Conditions), and only a program
// whose policy or guardrails have conditions does, so that one without
// them does not link CEL. aidgen lowers an application whose approval
// rules have a When, or that declares a guardrail of kind cel, with
// Language set, and a generated service links this package only then.
//
// A condition is an expression of type bool over the variables of a call
// (see package policy): tool, args, agent, user and thread; a guardrail's
// sees text and point besides. Numbers compare across int and double. Its
// evaluation is bounded by a cost limit, since it may iterate over
// arguments a model wrote.
//
// What it is not: it decides nothing itself; package policy orders the
// rules and package guard the guardrails.
package cel
