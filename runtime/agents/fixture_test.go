package agents_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const ordersArray = `[
  {"args": {"order_id": "AB-123456"}, "result": {"status": "delivered", "amount_usd": 59.9}},
  {"args": {"order_id": "AB-000001", "verbose": true}, "result": "plain text"},
  {"args": {"qty": 1.0, "order_id": "AB-000002"}, "error": "order is archived"}
]`

const ordersJSONL = `{"args": {"order_id": "AB-123456"}, "result": {"status": "delivered", "amount_usd": 59.9}}

{"args": {"order_id": "AB-000001", "verbose": true}, "result": "plain text"}
{"args": {"qty": 1.0, "order_id": "AB-000002"}, "error": "order is archived"}
`

func TestFixtureTool(t *testing.T) {
	for _, format := range []struct{ name, content string }{{"orders.json", ordersArray}, {"orders.jsonl", ordersJSONL}} {
		t.Run(format.name, func(t *testing.T) {
			path := writeFile(t, format.name, format.content)
			rows, err := agents.LoadFixture(path)
			if err != nil {
				t.Fatal(err)
			}
			wantLines := []string{":2", ":3", ":4"}
			if format.name == "orders.jsonl" {
				wantLines = []string{":1", ":3", ":4"}
			}
			for i, r := range rows {
				if r.Source != path+wantLines[i] {
					t.Errorf("row %d source %q, want %s", i, r.Source, path+wantLines[i])
				}
			}
			impl, err := agents.FixtureTool(rows)
			if err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				args, want, err string
			}{
				{args: `{"order_id":"AB-123456"}`, want: `{"status":"delivered","amount_usd":59.9}`},
				{args: ` { "verbose" : true ,  "order_id":"AB-000001" } `, want: "plain text"},
				{args: `{"order_id":"AB-000002","qty":1}`, err: "order is archived"},
				{args: `{"order_id":"AB-000002","qty":1e0}`, err: "order is archived"},
				{args: `{"order_id":"AB-999999"}`, err: `no fixture row has the arguments {"order_id":"AB-999999"}; the nearest is row 1 (` + path + wantLines[0] + `) with {"order_id":"AB-123456"} (differs in order_id)`},
				{args: `{"order_id":"AB-000001","verbose":false}`, err: `the nearest is row 2 (` + path + wantLines[1] + `) with {"order_id":"AB-000001","verbose":true} (differs in verbose)`},
				{args: `{"order_id":"AB-000002"}`, err: `the nearest is row 3 (` + path + wantLines[2] + `) with {"order_id":"AB-000002","qty":1} (differs in qty)`},
				{args: `[1]`, err: "arguments: not a JSON object"},
			}
			for _, tt := range tests {
				out, err := impl.Call(t.Context(), json.RawMessage(tt.args))
				if tt.err != "" {
					if err == nil || !strings.Contains(err.Error(), tt.err) {
						t.Errorf("%s: got %q, %v; want error %q", tt.args, out, err, tt.err)
					}
					continue
				}
				if err != nil || out != tt.want {
					t.Errorf("%s: got %q, %v; want %q", tt.args, out, err, tt.want)
				}
			}
		})
	}
}

func TestLoadFixtureErrors(t *testing.T) {
	tests := []struct {
		name, file, content string
		want                []string
	}{
		{"array syntax", "f.json", "[\n  {\"args\": {}, \"result\": 1},\n  {\"args\": {} \"result\": 2}\n]", []string{"f.json:3:15: invalid character '\"' after object key:value pair"}},
		{"jsonl syntax", "f.jsonl", "{\"args\": {}, \"result\": 1}\n{\"args\": {\"a\": }, \"result\": 2}\n", []string{"f.jsonl:2:16: invalid character '}'"}},
		{"empty", "f.json", "  \n", []string{"f.json: the fixture has no rows"}},
		{"empty array", "f.json", "[]", []string{"f.json: the fixture has no rows"}},
		{"every bad row at once", "f.json", "[\n {\"args\": {}, \"reslt\": 1},\n {\"result\": 1},\n {\"args\": {}},\n {\"args\": {}, \"result\": 1, \"error\": \"x\"},\n {\"args\": [1], \"result\": 1},\n {\"args\": {}, \"error\": \"\"},\n 7\n]", []string{
			`f.json:2:2: json: unknown field "reslt"`,
			`f.json:3:2: the row has no "args"`,
			`f.json:4:2: the row has neither "result" nor "error"`,
			`f.json:5:2: the row has both "result" and "error"`,
			`f.json:6:2: args: not a JSON object`,
			`f.json:7:2: the row's "error" is empty`,
			`f.json:8:2: a row is an object`,
		}},
		{"jsonl bad row", "f.jsonl", "{\"args\": {}, \"result\": 1}\n  {\"args\": 1, \"result\": 1}\n", []string{"f.jsonl:2:3: args: not a JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agents.ParseFixture(tt.file, []byte(tt.content))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
		})
	}
	if _, err := agents.LoadFixture(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "read fixture") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestFixtureToolRejects(t *testing.T) {
	tests := []struct {
		name string
		rows []agents.FixtureRow
		want string
	}{
		{"no rows", nil, "no rows"},
		{"same arguments", []agents.FixtureRow{
			{Args: json.RawMessage(`{"a":1,"b":[1.0]}`), Result: json.RawMessage(`1`), Source: "f.json:2"},
			{Args: json.RawMessage(`{"b":[1],"a":1.00}`), Result: json.RawMessage(`2`), Source: "f.json:3"},
		}, `row 1 (f.json:2) and row 2 (f.json:3) have the same arguments {"a":1,"b":[1]}`},
		{"no result", []agents.FixtureRow{{Args: json.RawMessage(`{}`)}}, "row 1 has neither a result nor an error"},
		{"args not an object", []agents.FixtureRow{{Args: json.RawMessage(`"x"`), Result: json.RawMessage(`1`)}}, "row 1: args: not a JSON object"},
		{"bad result", []agents.FixtureRow{{Args: json.RawMessage(`{}`), Result: json.RawMessage(`{`)}}, "row 1: result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := agents.FixtureTool(tt.rows); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// Through a run, a matched row is the observation and an unmatched call is
// an error observation naming the nearest row, which the model can act on.
func TestFixtureToolInARun(t *testing.T) {
	rows, err := agents.ParseFixture("orders.json", []byte(ordersArray))
	if err != nil {
		t.Fatal(err)
	}
	impl, err := agents.FixtureTool(rows)
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, fake.Config{Script: []fake.Step{
		calls(call("1", "orders", `{"order_id":"AB-123456"}`), call("2", "orders", `{"order_id":"AB-12345"}`)),
		answer("done"),
	}})
	r := newRuntime(t, agents.Config{
		Gateway:         fx.gw,
		Agents:          []agents.Agent{{Name: "a", Model: "small", Tools: []string{"orders"}}},
		Tools:           []agents.Tool{{Name: "orders", Description: "d"}},
		Implementations: map[string]agents.Implementation{"orders": impl},
	})
	res := mustRun(t, r, "a", "go", agents.RunOptions{})
	got := res.Steps[0].ToolCalls
	if got[0].Observation != `{"status":"delivered","amount_usd":59.9}` || got[0].ErrorKind != "" {
		t.Errorf("matched: %+v", got[0])
	}
	want := `error: tool orders failed: no fixture row has the arguments {"order_id":"AB-12345"}; the nearest is row 1 (orders.json:2) with {"order_id":"AB-123456"} (differs in order_id)`
	if got[1].Observation != want || got[1].ErrorKind != agents.KindToolFailed {
		t.Errorf("unmatched: %q", got[1].Observation)
	}
	// The model read both observations.
	msgs := fx.fake.Requests()[1].Messages
	if last := msgs[len(msgs)-1]; last.Content != want {
		t.Errorf("the model read %q", last.Content)
	}
}
