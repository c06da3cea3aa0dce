// Package gen turns an application description (runtime/app.Description)
// into the Go service that runs it: go.mod, main.go (one call to
// runtime/serve's Main, which does the flags, logs, shutdown and HTTP
// service every application shares), aid_gen.go (the description as a Go
// literal) and, for tools implemented in Go, the business package: typed
// inputs generated from each tool's JSON Schema and one stub per tool for
// the team to fill in.
//
// Generation is a pure function (Generate: description → file contents by
// path); it reads and writes nothing, and the same description always
// gives the same bytes. The CLI (aidgen build) loads the app file, lowers
// it with internal/lower, as aidgen eval does, and writes the files; so the
// generator links neither the IR nor CUE (a test holds it to that), and
// the service, which hands the literal to app.Assemble, cannot wire an
// application differently from the interpreter.
//
// The literal is spelled by Literal, which writes each kind's
// configuration with its own package-qualified type (fake.Kind{...},
// pgvector.Kind{...}): aid_gen.go imports exactly the kind packages the
// application uses, so the service links nothing else.
//
// It is not the runtime: whatever a service does beyond wiring lives under
// runtime/, and the code emitted stays glue a person could have written.
package gen
