package lower_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/gen"
	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
	"github.com/aidgen/aid/runtime/agents/tools/http"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// TestKindsArePlainData walks the configuration type of every kind in
// lowering's tables: a description holds these values, and gen spells them
// as Go literals, so they may hold no func, channel, interface or
// unexported field anywhere inside, but for the fake's embedding analyzer
// (fake.Kind.Analyzer), whose one value lowering sets, analysis.English, gen
// spells with its own type, so that a service links the stemmer only when
// its fake provider embeds.
func TestKindsArePlainData(t *testing.T) {
	var types []reflect.Type
	for _, k := range lower.ProviderKinds {
		types = append(types, reflect.TypeOf(k))
	}
	for _, k := range lower.ToolKinds {
		if k != nil {
			types = append(types, reflect.TypeOf(k))
		}
	}
	for _, k := range lower.StoreKinds {
		types = append(types, reflect.TypeOf(k))
	}
	for _, k := range lower.ResourceKinds {
		types = append(types, reflect.TypeOf(k))
	}
	types = append(types, reflect.TypeFor[cel.Language]())     // Description.Conditions
	types = append(types, reflect.TypeFor[analysis.English]()) // fake.Kind.Analyzer
	for _, rt := range types {
		if err := gen.Spellable(rt, reflect.TypeFor[fake.Analyzer]()); err != nil {
			t.Error(err)
		}
	}
}

// TestDecode decodes blocks as the IR writes them: durations as Go
// duration strings, the kind left out, and every field of the block
// required to be the configuration's, so that a field the schema allows
// and the configuration lacks is an error rather than lost.
func TestDecode(t *testing.T) {
	got, err := lower.Decode(kind.Providers, kind.ProviderOpenAICompatible, ir.Config(`{"kind":"openai-compatible","baseURL":"https://x.test/v1","apiKeyEnv":"K","timeout":"1m30s","maxRetries":2}`))
	want := openaicompat.Kind{BaseURL: "https://x.test/v1", APIKeyEnv: "K", Timeout: 90 * time.Second, MaxRetries: 2}
	if err != nil || got != want {
		t.Errorf("Decode = %#v, %v; want %#v", got, err, want)
	}
	got, err = lower.Decode(kind.Tools, kind.ToolHTTP, ir.Config(`{"kind":"http","url":"https://x.test","headersFromEnv":{"A":"B"}}`))
	if k, ok := got.(http.Kind); err != nil || !ok || k.HeadersFromEnv["A"] != "B" {
		t.Errorf("Decode(http) = %#v, %v", got, err)
	}
	got, err = lower.Decode(kind.Stores, kind.StorePGVector, ir.Config(`{"kind":"pgvector","distance":"l2","dsnEnv":"DSN","table":"kb"}`))
	if err != nil || got != (pgvector.Kind{DSNEnv: "DSN", Table: "kb"}) {
		t.Errorf("Decode(pgvector) = %#v, %v; the distance is every store's, not the kind's", got, err)
	}
	if got, err := lower.Decode(kind.Tools, kind.ToolGo, ir.Config(`{"kind":"go"}`)); got != nil || err != nil {
		t.Errorf("Decode(go) = %#v, %v; want no configuration", got, err)
	}
	for _, tt := range []struct {
		point       kind.Point
		name, block string
		want        string
	}{
		{kind.Tools, kind.ToolHTTP, `{"kind":"http","url":"https://x.test","verb":"PUT"}`, `unknown field "verb"`},
		{kind.Providers, kind.ProviderOpenAICompatible, `{"kind":"openai-compatible","timeout":"soon"}`, `timeout`},
		{kind.Providers, "anthropicx", `{"kind":"anthropicx"}`, `unknown provider kind "anthropicx"; known kinds: anthropic, fake, openai-compatible`},
	} {
		_, err := lower.Decode(tt.point, tt.name, ir.Config(tt.block))
		var de *kind.DeferredError
		if err == nil || !strings.Contains(err.Error(), tt.want) || errors.As(err, &de) {
			t.Errorf("Decode(%s %s) = %v, want a plain error containing %q", tt.point, tt.name, err, tt.want)
		}
	}
}

// server is a resource kind that is not built, for the test below.
type server struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
}

func (server) ResourceKind() string { return "servers" }

// TestResources lowers the entries of a resource kind's section through
// ResourceKinds, as it lowers every kind, in the document's order.
func TestResources(t *testing.T) {
	lower.ResourceKinds["servers"] = server{}
	defer delete(lower.ResourceKinds, "servers")
	doc := &ir.Document{Name: "x", Resources: []*ir.Resource{
		{Kind: "servers", Name: "db", Config: ir.Config(`{"command":"db-server"}`)},
		{Kind: "servers", Name: "fs", Config: ir.Config(`{"command":"fs-server","args":["--root","/srv"]}`)},
	}}
	desc, err := lower.Document(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []kind.Resource{
		{Name: "db", Kind: server{Command: "db-server"}},
		{Name: "fs", Kind: server{Command: "fs-server", Args: []string{"--root", "/srv"}}},
	}
	if !reflect.DeepEqual(desc.Resources, want) {
		t.Errorf("resources %#v, want %#v", desc.Resources, want)
	}
	doc.Resources[0].Config = ir.Config(`{"command":"db-server","port":5432}`)
	if _, err := lower.Document(doc); err == nil || !strings.Contains(err.Error(), `servers "db"`) || !strings.Contains(err.Error(), `unknown field "port"`) {
		t.Errorf("a field the kind lacks: %v", err)
	}
}

// TestFakeAnalyzerOnlyWhenItEmbeds: lowering sets the fake's embedding
// analyzer on a fake provider an embedding model routes to (support-desk's)
// and on no other (minimal's, which has no embedding model), so that a
// service links the Snowball stemmer only when its fake embeds.
func TestFakeAnalyzerOnlyWhenItEmbeds(t *testing.T) {
	for _, tt := range []struct {
		app  string
		want fake.Analyzer
	}{
		{"../../testdata/cases/minimal/app.cue", nil},
		{"../../examples/support-desk/app.cue", analysis.English{}},
	} {
		doc, err := ir.Load(tt.app)
		if err != nil {
			t.Fatal(err)
		}
		d, err := lower.Document(doc)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Providers) != 1 {
			t.Fatalf("%s: %d providers, want the fake alone", tt.app, len(d.Providers))
		}
		if k, ok := d.Providers[0].Kind.(fake.Kind); !ok || k.Analyzer != tt.want {
			t.Errorf("%s: provider kind %#v, want a fake.Kind with Analyzer %#v", tt.app, d.Providers[0].Kind, tt.want)
		}
	}
}
