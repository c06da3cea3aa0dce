// Package ir loads an aid application file (app.cue) into a typed,
// validated Document: the contract every other part of aid agrees on.
//
// Loading runs in stages. The file is compiled and unified with the
// embedded schema's #App definition and validated for concreteness, so
// syntax errors, wrong types, unknown fields and missing required fields are
// CUE's to report. The result is decoded into Go structs, and then named
// semantic passes check what CUE cannot express: every alias, model, tool,
// agent, store, retriever and budget reference resolves to something of the
// right kind (resolve); ladders descend in price, capabilities match what
// agents ask of their models, JSON Schemas compile, an LLM judge gates only
// with a calibration set
// (check); no kind the schema accepts only to name it (a #Deferred
// definition: a qdrant store, a web source, a bedrock provider) is used,
// each being reported as not built yet (deferred); and every file the IR
// names exists relative to it (files).
//
// Every problem is reported at once, as an Errors value whose entries carry
// the file:line:col of the offending value and say what to change.
//
// The package does not run anything: it neither calls models nor reads
// datasets beyond checking they exist (instructions files are the exception;
// their text is the agent's instructions). Of the runtime it imports only
// what states a rule both sides apply, so that vet and the runtime cannot
// disagree: the kinds' names (runtime/kind), the cross-field rules
// (runtime/rules), the approval policy's and the guardrails' compilers
// (runtime/agents/policy and runtime/agents/guard, which link CEL and the
// JSON Schema compiler), the file patterns of retriever sources
// (runtime/fileglob), the skills' parser (runtime/agents/skill) and the
// fields a prompt template is rendered with (runtime/eval/dataset's
// PromptData). It links no provider SDK, database driver or
// OpenTelemetry (TestLinksNoRuntime).
package ir
