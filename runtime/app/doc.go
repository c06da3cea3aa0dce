// Package app assembles the runtime for an application described by an IR
// document: the gateway with its pinned catalog, providers and budgets, and
// the evals with their datasets, targets, metrics and thresholds.
//
// It is the one place that translates ir values into runtime values, so
// that the aidgen CLI and generated services wire an application the same
// way. It holds no behaviour of its own: what a gateway, a metric or a gate
// does lives in runtime/gateway and runtime/eval, which do not know the IR
// and which teams may use without it.
package app
