// Package guard holds the one definition of a declared guardrail: what an
// application's guardrails section says (Guardrail), the checks aidgen vet
// and the agent runtime both make of it (Check), and the compiled checker
// that judges a value (Compile, Checker.Check). Package agents turns each
// compiled guardrail into a hook at its points (input, toolArguments,
// toolResult, output), so declared guardrails and a Go team's own hooks
// are one mechanism; the ir package reports each Problem at its place in
// the app file.
//
// # Kinds
//
//   - pattern: RE2 regular expressions, whole words (case-insensitive),
//     and named built-ins: email, phone, card (13 to 19 digits that pass
//     the Luhn check), iban (that pass the mod-97 check) and injection
//     (common prompt-injection phrasings such as "ignore all previous
//     instructions"). It trips on any match; a redaction replaces each
//     match.
//   - cel: a CEL condition of type bool (package policy's guardrail
//     environment: text, point, tool, args, agent, user, thread), compiled
//     by the language Deps.Conditions gives (package policy/cel). It trips
//     when the condition holds, or when it cannot be judged.
//   - schema: a JSON Schema the value must match: the arguments at
//     toolArguments, elsewhere the text read as JSON (or as a JSON string
//     when it is not JSON). It trips when the value does not match.
//   - go: a Go function registered by name (Func). It trips when the
//     function says so.
//   - model: a classifier. The alias Model is asked, with Prompt as its
//     instructions and the value as the user's message, for a verdict: a
//     JSON document matching Verdict (DefaultVerdict: {"tripped": bool,
//     "reason": string}). It trips when the verdict says tripped. A call
//     that fails, times out (Timeout), is refused by a budget, or answers
//     something that is not a verdict gives no verdict, which trips the
//     guardrail (a check that could not be made never lets a value
//     through) unless OnError is pass; the finding says why either way.
//     The call is made by the Classifier the program gives (Deps): the
//     agent runtime's goes through the gateway, priced and charged to the
//     run's budgets like any model call, and a replay reuses the recorded
//     verdict instead (Checker.Judge says what judged, so a changed
//     classifier is told apart). A model guardrail may name an Agent
//     instead of a Model and Prompt: the agent runtime runs the agent on
//     the value, as a delegate runs, and its answer (its output schema
//     is the verdict) is the classifier's. CheckAgents holds the rules
//     of such an agent: declared, answering a verdict, causing no effect,
//     and not run by the guardrail it judges.
//
// What it is not: it does not know about runs, events or the record; the
// agent runtime calls a Checker and decides what its action does.
package guard
