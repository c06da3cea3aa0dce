package ir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	aid "github.com/aidgen/aid"
	"github.com/aidgen/aid/runtime/kind"
)

// serversSchema is the embedded schema with a section of a resource kind
// that is not built, servers, whose entries name a script file, as MCP's
// mcpServers will be: what a resource kind adds to schema.cue.
const serversSchema = `
#App: servers: [#Name]: {
	// command starts the server.
	command: string & !=""
	// script is a file the server reads, relative to this file.
	script?: string & !=""
}
`

// serverKinds is runtime/kind's table with the resource kind servers
// added, and the fixture tool kind's file field made a reference to a
// server: the two entries a resource kind and a tool kind using it add to
// runtime/kind's list.
func serverKinds() kindTable {
	k := kinds()
	k.resources = append(k.resources, "servers")
	lookup := k.lookup
	k.lookup = func(p kind.Point, name string) (kind.Info, bool) {
		switch {
		case p == kind.Resources && name == "servers":
			return kind.Info{Point: p, Name: name, Files: []string{"script"}}, true
		case p == kind.Tools && name == kind.ToolFixture:
			return kind.Info{Point: p, Name: name, Refs: []kind.Ref{{Field: "file", Section: "servers", What: "server"}}}, true
		}
		return lookup(p, name)
	}
	return k
}

// loadWithServers loads src against the schema with the servers section.
func loadWithServers(t *testing.T, dir, src string) (*Document, error) {
	t.Helper()
	sc, err := compileSchema(aid.Schema() + serversSchema)
	if err != nil {
		t.Fatal(err)
	}
	l := newLoader(filepath.Join(dir, "app.cue"), sc)
	l.kinds = serverKinds()
	return l.load([]byte(src))
}

// TestResources checks the generic support of resource kinds: ir decodes
// the section of every resource kind runtime/kind lists into
// Document.Resources, checks the files its entries name, and resolves the
// fields of other kinds that refer to an entry, each error at its
// position, without code of its own for the kind.
func TestResources(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "script.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	const app = `name: "x", version: "1.0.0"
providers: p: kind: "fake"
models: "m-1": {provider: "p", contextWindow: 100, maxOutputTokens: 10, cost: inputPer1kUSD: 0, capabilities: ["tools"]}
aliases: m: "m-1"
servers: {
	fs: {command: "fs-server", script: "script.json"}
	db: {command: "db-server"}
}
`
	doc, err := loadWithServers(t, dir, app+`tools: read: {description: "Read.", implementation: {kind: "fixture", file: "fs"}}
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Resources) != 2 || doc.Resources[0].Name != "db" || doc.Resources[1].Name != "fs" {
		t.Fatalf("resources %+v, want db and fs", doc.Resources)
	}
	fs, ok := doc.Resource("servers", "fs")
	if got, _ := fs.Config.String("command"); !ok || got != "fs-server" {
		t.Errorf("Resource(servers, fs) = %+v, %v", fs, ok)
	}
	b, err := fs.MarshalJSON()
	if err != nil || string(b) != `{"kind":"servers","name":"fs","command":"fs-server","script":"script.json"}` {
		t.Errorf("a resource's JSON: %s, %v", b, err)
	}

	_, err = loadWithServers(t, dir, strings.Replace(app, `"script.json"`, `"missing.json"`, 1)+`tools: read: {description: "Read.", implementation: {kind: "fixture", file: "ft"}}
`)
	es, ok := IsInvalid(err)
	if !ok || len(es) != 2 {
		t.Fatalf("load = %v, want two errors", err)
	}
	for i, want := range []string{
		`app.cue:6:37: servers.fs.script: file "missing.json" does not exist`,
		`app.cue:9:77: tools.read.implementation.file: unknown server "ft" (did you mean "fs"?); known servers: db, fs`,
	} {
		if got := es[i].Error(); !strings.Contains(got, want) {
			t.Errorf("error %d = %q, want %q", i, got, want)
		}
	}
}
