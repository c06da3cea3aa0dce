// Package appeval assembles an application with its evals and builds each
// eval's run: its dataset, its target (an agent, a model or a retriever of
// the application), its metrics and judge, its budget account, its
// thresholds, and what each tool an agent target can call does in the
// eval's samples (live, stub or replay).
//
// The evals are not part of app.Description, which a generated service
// holds: a service runs no eval, so it neither carries their definitions
// nor links the eval package and its statistics (gonum). aidgen eval and
// its workers lower the evals from the app file beside the description
// (internal/lower.Evals) and call Assemble here, which calls app.Assemble
// and wraps what an eval must see (the tools' implementations, through
// app.Options.WrapTool).
//
// What it is not: the sampling, scoring and gating are package
// runtime/eval's; this package connects them to an assembled application.
package appeval
