package mcp_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/app"
)

// recordDesk runs the desk application on the stdio test server and
// returns its recording.
func recordDesk(t *testing.T) (app.Description, *agents.Recording) {
	t.Helper()
	s, lookup := stdioServer("serve")
	desc := desk(t, s)
	a, err := app.Assemble(t.Context(), desc, app.Options{LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	res, err := a.Agents.Run(t.Context(), "desk", "What is the weather?", agents.RunOptions{})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("run: %v, %+v", err, res)
	}
	stored, err := a.Agents.Store().LoadRun(t.Context(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := agents.Record(&b, stored, desc.Name, desc.Version, ""); err != nil {
		t.Fatal(err)
	}
	rec, err := agents.ReadRecording(&b)
	if err != nil {
		t.Fatal(err)
	}
	return desc, rec
}

func replay(t *testing.T, desc app.Description, rec *agents.Recording) *agents.ReplayReport {
	t.Helper()
	cfg, err := app.ReplayConfig(desc, rec.Learned())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := agents.Replay(t.Context(), cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestReplayWithoutServer records a run of an application whose agent
// offers a server's tools, a declared one and imported ones, and replays
// it on the same application whose server cannot be started: the
// recording holds the definitions the server gave, so the replay goes as
// recorded. A change of the application's side of a server's tool (its
// description) is the request's other definitions; a recording whose
// server changed a tool's definition during the run says so, naming the
// server and the tool.
func TestReplayWithoutServer(t *testing.T) {
	desc, rec := recordDesk(t)
	gone := desc
	gone.Resources = slicesClone(desc.Resources)
	gone.Resources[0].Kind = mcp.Server{Transport: mcp.TransportStdio, Command: "/nonexistent/mcp-server"}
	if rep := replay(t, gone, rec); rep.Divergence != nil || rep.Steps != 3 || rep.Calls != 3 { // the fourth call, refused for its arguments, is not run
		t.Fatalf("an unchanged application diverges: %+v %+v", rep, rep.Divergence)
	}

	// Without the definitions (a recording made before they were kept),
	// the replay has the declarations alone, and diverges at once.
	cfg, err := app.ReplayConfig(gone, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := agents.Replay(t.Context(), cfg, rec); err != nil || rep.Divergence == nil || rep.Divergence.Step != 1 {
		t.Fatalf("the declarations alone: %v %+v", err, rep)
	}

	described := gone
	described.Tools = slicesClone(gone.Tools)
	described.Tools[0].Decl.Description = "Say it back."
	rep := replay(t, described, rec)
	if d := rep.Divergence; d == nil || d.Kind != agents.DivergeRequest || d.Step != 1 || !strings.Contains(d.Message, "other definitions") {
		t.Fatalf("a changed description: %+v", d)
	}

	// The server changed forecast's schema before step 2: a run continued
	// in another process listed it again.
	changed := false
	step2 := rec.Steps[1].Request
	step2.Tools, step2.Fingerprint, step2.Learned = rec.Steps[0].Request.Tools, "changed", nil
	for _, l := range rec.Steps[0].Request.Learned {
		if l.Tool == "srv_forecast" {
			var def map[string]any
			if err := json.Unmarshal(l.Definition, &def); err != nil {
				t.Fatal(err)
			}
			def["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{"days": map[string]any{"type": "integer"}}}
			l.Definition, _ = json.Marshal(def)
			changed = true
		}
		step2.Learned = append(step2.Learned, l)
	}
	if !changed {
		t.Fatalf("the recording holds no definition of srv_forecast: %+v", rec.Steps[0].Request.Learned)
	}
	rep = replay(t, gone, rec)
	d := rep.Divergence
	if d == nil || d.Step != 2 || !strings.Contains(d.Message, `MCP server "srv"`) || !strings.Contains(d.Message, "srv_forecast") || !strings.Contains(d.Diff, "days") {
		t.Fatalf("a server's changed tool: %+v", d)
	}
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }
