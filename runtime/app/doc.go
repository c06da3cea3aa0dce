// Package app assembles the runtime of an application from its
// Description: plain data (the pinned catalog, providers, budgets, tools,
// agents, stores, retrievers, evals and service settings) that names no
// runtime object, so that it can be written as a Go literal.
//
// It is the one place that turns such a description into runtime values,
// so that aidgen (which lowers an app file to a Description in
// internal/lower) and a generated service (which holds the Description as a
// literal) wire an application the same way. Logic that is more than
// copying a field lives here too, once: the retry count of each provider
// kind, the tools built from their kind (http, fixture), the memory stores
// agents name, and the budget accounts of eval runs. Assemble checks
// everything it can before anything runs and reports every problem at once.
//
// It does not read the IR or link CUE (the runtime never does), nor pgx:
// PostgreSQL-backed state and stores come in through Options, so a program
// that keeps its state in memory does not link a database driver. What a
// gateway, an agent, a retriever or a gate does lives in their packages,
// which teams may use without this one.
package app
