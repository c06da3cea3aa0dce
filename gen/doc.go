// Package gen turns an application document into the Go service that runs
// it: go.mod, main.go (one call to runtime/serve's Main, which does the
// flags, logs, shutdown and HTTP service every application shares),
// aid_gen.go (the application description as a Go literal) and, for tools
// implemented in Go, the business package: typed inputs generated from
// each tool's JSON Schema and one stub per tool for the team to fill in.
//
// Generation is a pure function (Generate: document → file contents by
// path); it reads and writes nothing, and the same document always gives
// the same bytes. The CLI (aidgen build) writes the files. The description
// in aid_gen.go is what internal/lower makes of the document, spelled by
// Literal, and the service hands it to app.Assemble as aidgen eval does, so
// the interpreter and the generated service cannot wire an application
// differently.
//
// It is not the runtime: whatever a service does beyond wiring lives under
// runtime/, and the code emitted stays glue a person could have written.
package gen
