package kind

import "fmt"

// DeferredError reports a feature that is not built. It is raised instead of
// approximating the feature. It lives here, in the leaf every layer imports,
// because the gateway, the stores, the tools and generated business stubs
// all return it and the service and the CLI test for it.
type DeferredError struct {
	// Feature names what is missing.
	Feature string
}

// Error implements error.
func (e *DeferredError) Error() string {
	return fmt.Sprintf("%s is not built yet", e.Feature)
}

// UnavailableError reports a dependency that could not be reached or
// stopped answering: the database behind a ledger, a run store, memory or
// a vector store refused the connection, dropped it, or did not answer in
// time. It is the type every store gives such failures, so that a caller
// tells an outage (try again later) from a fault (do not), and a service
// answers 503 without showing the cause, which names hosts and users: that
// is for the log.
type UnavailableError struct {
	// Dependency names what is down in a client's words: "run store",
	// "budget ledger", "memory store", "vector store".
	Dependency string
	// Err is the driver's error, with connection details.
	Err error
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return e.Dependency + " unavailable: " + e.Err.Error()
}

// Unwrap returns the driver's error.
func (e *UnavailableError) Unwrap() error { return e.Err }
