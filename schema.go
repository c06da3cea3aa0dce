// Package aid holds the embedded IR schema, so that the ir package and the
// aidgen binary agree on one contract without reading files at run time.
package aid

import _ "embed"

//go:embed schema.cue
var schema string

// Schema returns the CUE source of the IR schema (schema.cue). It defines
// #App, the shape every app.cue file is unified with. It is a function
// returning a string, not an exported variable, so that no importer can
// change the contract the others see.
func Schema() string { return schema }

// SchemaFilename is the stable name the schema is compiled under, so that a
// position inside it reads the same on every machine.
const SchemaFilename = "schema.cue"
