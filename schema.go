// Package aid holds the embedded IR schema, so that the ir package and the
// aidgen binary agree on one contract without reading files at run time.
package aid

import _ "embed"

// Schema is the CUE source of the IR schema (schema.cue). It defines #App,
// the shape every app.cue file is unified with.
//
//go:embed schema.cue
var Schema []byte

// SchemaFilename is the stable name the schema is compiled under, so that a
// position inside it reads the same on every machine.
const SchemaFilename = "schema.cue"
