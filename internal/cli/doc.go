// Package cli is the aidgen command line: one file per verb, each a cobra
// command built over explicit streams, so tests run the real commands and
// read what they print.
//
// Exit codes are part of the interface: 0 success, 1 the input is invalid
// (for eval a regression, for run a run that ended without an answer), 2 a
// usage or configuration error, 3 an inconclusive eval, 4 a run paused for a
// decision. Commands
// report through one describer (describe) so every error reads the same.
package cli
