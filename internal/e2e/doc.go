// Package e2e holds the end-to-end tests of a generated service: they build
// examples/support-desk (with the overlays under testdata/e2e) through the
// real aidgen build, compile the generated module offline with the go
// command, run the binary as a child process on a loopback port, and talk to
// it over HTTP as a client would, with the openai-go client where the route is
// OpenAI's, and with the official OpenAI Node client (pinned in openai/, installed
// with npm ci) for the loop a stock client runs. The package has no code of
// its own; the tests are the point.
package e2e
