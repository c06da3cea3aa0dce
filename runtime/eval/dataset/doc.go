// Package dataset reads eval datasets: the cases an eval samples (an
// input, the answer expected, and what the case says of approvals, tool
// answers and guardrails), from a JSON or JSON Lines file, every problem
// reported at its file:line:col.
//
// It is package eval's reading of datasets, on its own so that what reads
// a dataset without evaluating anything (the fake provider's answer key,
// runtime/gateway/fake) does not link the eval package and its statistics
// (gonum). Package eval names the same types (eval.Case, eval.Dataset,
// eval.ReadDataset, …) as aliases of these.
package dataset
