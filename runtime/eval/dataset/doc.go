// Package dataset is the eval dataset format: a named, versioned list of
// cases (Case, Dataset), read from JSON or JSON Lines with every problem
// reported at its position (Load, Read, ParseJSON, ParseJSONL, ErrorList).
//
// It imports neither the gateway nor the statistics of package eval, which
// names its types with aliases (eval.Case, eval.Dataset, ...), so that
// what reads a dataset without evaluating anything, such as the fake
// provider's answer key (runtime/gateway/fake), links only this.
package dataset
