// Package app assembles the runtime of an application from its
// Description: plain data (the pinned catalog, providers, budgets, tools,
// agents, stores, retrievers, evals, resources and service settings) that
// names no runtime object, so that it can be written as a Go literal.
//
// Every element of a kind (a provider, a tool implemented without Go code,
// a store, a resource) holds its kind's own typed configuration in a field
// of its extension point's interface type: gateway.ProviderKind,
// agents.ToolKind, retrieval.StoreKind, kind.ResourceKind. The
// configuration is plain data too, and builds the element itself, so this
// package imports no kind: a generated service, whose description literal
// names fake.Kind or pgvector.Kind, links exactly the kinds its application
// uses. See runtime/kind for the contract.
//
// It is the one place that turns such a description into runtime values,
// so that aidgen (which lowers an app file to a Description in
// internal/lower) and a generated service (which holds the Description as a
// literal) wire an application the same way. Logic that is more than
// copying a field lives here too, once: what each kind is lent (kind.Env:
// the application's files, on disk or embedded, the environment, an HTTP
// client, a scope that App.Close closes), the expansion of a tool
// declaration into the tools its kind built, the memory stores agents name,
// and the budget accounts of eval runs. Assemble checks everything it can
// before anything runs and reports every problem at once.
//
// It does not read the IR or link CUE (the runtime never does), nor pgx:
// PostgreSQL state comes in through Options.OpenState, a PostgreSQL store's
// vectors through its kind, and agents' memory in such a store through
// Options.OpenMemory, so a program that keeps everything in memory
// does not link a database driver. What a gateway, an agent, a retriever or
// a gate does lives in their packages, which teams may use without this
// one.
package app
