package retrieval_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

const embedWidth = 128

// newGateway returns a gateway with the fake provider behind one embedding
// alias, "embed", priced so that every call costs something.
func newGateway(t testing.TB, budgets ...gateway.Budget) *gateway.Gateway {
	t.Helper()
	return newGatewayWidth(t, embedWidth, budgets...)
}

// newGatewayWidth is newGateway with the width of "embed" given.
func newGatewayWidth(t testing.TB, width int, budgets ...gateway.Budget) *gateway.Gateway {
	t.Helper()
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{
			{Alias: "embed", Spec: gateway.ModelSpec{ID: "fake-embed-1", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: width, Cost: gateway.CostProfile{InputPer1kUSD: 0.02}}},
			{Alias: "embed-small", Spec: gateway.ModelSpec{ID: "fake-embed-small", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 16, Cost: gateway.CostProfile{InputPer1kUSD: 0.02}}},
			{Alias: "chat", Spec: gateway.ModelSpec{ID: "fake-chat", Provider: "fake", MaxOutputTokens: 10}},
		},
		Providers: map[string]gateway.Provider{"fake": p},
		Budgets:   budgets,
		Retry:     gateway.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// corpus is three documents of several chunks each at size 120.
func corpus() map[string]string {
	para := func(topic string, n int) string {
		var b strings.Builder
		b.WriteString("# " + topic + "\n\n")
		for i := range n {
			b.WriteString(strings.Repeat(topic+" detail number "+string(rune('a'+i))+". ", 3) + "\n\n")
		}
		return b.String()
	}
	return map[string]string{
		"docs/refunds.md":           para("refunds", 4),
		"docs/shipping.md":          para("shipping", 4),
		"docs/sub/login.txt":        para("login", 3),
		"docs/ignored/draft.md":     para("draft", 2),
		"notes/elsewhere.md":        para("elsewhere", 1),
		"docs/.hidden/secret.md":    para("secret", 1),
		"docs/refunds-attachment.x": "not matched by the pattern",
	}
}

type fixture struct {
	gw    *gateway.Gateway
	dir   string
	store *memory.Store
	r     *retrieval.Retriever
}

func newFixture(t *testing.T, rerank string) *fixture {
	t.Helper()
	f := &fixture{gw: newGateway(t), dir: t.TempDir()}
	writeFiles(t, f.dir, corpus())
	var err error
	f.store, err = memory.NewStore(embedWidth, retrieval.DistanceCosine)
	if err != nil {
		t.Fatal(err)
	}
	f.r = f.retriever(t, "kb", rerank)
	return f
}

func (f *fixture) retriever(t *testing.T, name, rerank string) *retrieval.Retriever {
	t.Helper()
	e, err := retrieval.NewGatewayEmbedder(f.gw, "embed")
	if err != nil {
		t.Fatal(err)
	}
	rr, err := retrieval.NewReranker(rerank)
	if err != nil {
		t.Fatal(err)
	}
	r, err := retrieval.New(retrieval.Binding{
		Name:     name,
		Source:   retrieval.Source{Dir: f.dir, Files: []string{"docs/**/*.md", "docs/**/*.txt"}, Exclude: []string{"docs/ignored/**"}},
		Chunker:  mustChunker(t, 120, 20),
		Embedder: e,
		Store:    f.store,
		Reranker: rr,
		TopK:     3,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) ingest(t *testing.T) retrieval.IngestStats {
	t.Helper()
	st, err := f.r.Ingest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *fixture) spend(t *testing.T) gateway.SpendSummary {
	t.Helper()
	s, err := f.gw.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) idsOf(t *testing.T, source string) []string {
	t.Helper()
	ids, err := f.store.IDs(t.Context(), retrieval.Filter{retrieval.MetaRetriever: "kb", retrieval.MetaSource: source})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestIngestIdempotent checks that ingesting the same input twice is a
// no-op diff that embeds nothing and charges nothing the second time.
func TestIngestIdempotent(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	first := f.ingest(t)
	if first.Files != 3 || first.Added == 0 || first.Unchanged != 0 || first.Removed != 0 {
		t.Fatalf("first ingest: %+v", first)
	}
	if f.store.Len() != first.Added {
		t.Fatalf("store holds %d records after adding %d", f.store.Len(), first.Added)
	}
	before := f.spend(t)
	second := f.ingest(t)
	if want := (retrieval.IngestStats{Files: 3, Unchanged: first.Added}); !reflect.DeepEqual(second, want) {
		t.Errorf("second ingest: %+v, want %+v", second, want)
	}
	if after := f.spend(t); after.Calls != before.Calls || after.Total != before.Total {
		t.Errorf("re-ingesting unchanged input charged %+v more", after.Total.Sub(before.Total))
	}
	for _, src := range []string{"docs/ignored/draft.md", "notes/elsewhere.md", "docs/.hidden/secret.md"} {
		if ids := f.idsOf(t, src); len(ids) != 0 {
			t.Errorf("%s should not be ingested, has %d chunks", src, len(ids))
		}
	}
}

// TestIngestIncremental edits one file, deletes another and adds a third:
// only their chunks change, and only new chunks are embedded.
func TestIngestIncremental(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	f.ingest(t)
	refunds, shipping, login := f.idsOf(t, "docs/refunds.md"), f.idsOf(t, "docs/shipping.md"), f.idsOf(t, "docs/sub/login.txt")
	text := corpus()["docs/refunds.md"]
	// Change the last paragraph only: the chunks before it keep their ids.
	edited := strings.Replace(text, "refunds detail number d", "refunds detail number z", 1)
	writeFiles(t, f.dir, map[string]string{"docs/refunds.md": edited})
	before := f.spend(t)
	st := f.ingest(t)
	after := f.spend(t)
	newRefunds := f.idsOf(t, "docs/refunds.md")
	kept := 0
	for _, id := range newRefunds {
		if slices.Contains(refunds, id) {
			kept++
		}
	}
	if st.Added == 0 || st.Removed == 0 || st.Added != len(newRefunds)-kept || st.Removed != len(refunds)-kept {
		t.Errorf("edit of one file: %+v (kept %d of %d chunks, now %d)", st, kept, len(refunds), len(newRefunds))
	}
	if kept == 0 {
		t.Errorf("editing the last paragraph re-embedded every chunk of the file")
	}
	if st.Unchanged != len(shipping)+len(login)+kept {
		t.Errorf("unchanged %d, want %d", st.Unchanged, len(shipping)+len(login)+kept)
	}
	if !slices.Equal(f.idsOf(t, "docs/shipping.md"), shipping) || !slices.Equal(f.idsOf(t, "docs/sub/login.txt"), login) {
		t.Error("chunks of files that did not change were touched")
	}
	if calls := after.Calls - before.Calls; calls != 1 {
		t.Errorf("the edit took %d embedding calls, want 1", calls)
	}
	// The tokens charged are those of the new chunks only.
	var want int64
	for _, h := range f.hitsOf(t, newRefunds, refunds) {
		want += gateway.EstimateTokens(retrieval.EmbedText(h))
	}
	if got := after.Total.Tokens - before.Total.Tokens; got != want {
		t.Errorf("the edit charged %d tokens, the new chunks have %d", got, want)
	}

	if err := os.Remove(filepath.Join(f.dir, "docs", "sub", "login.txt")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, f.dir, map[string]string{"docs/new.md": "# New\n\nA new page."})
	st = f.ingest(t)
	if st.Files != 3 || st.Removed != len(login) || st.Added != 1 {
		t.Errorf("after deleting login.txt and adding new.md: %+v (login had %d chunks)", st, len(login))
	}
	if ids := f.idsOf(t, "docs/sub/login.txt"); len(ids) != 0 {
		t.Errorf("chunks of a vanished file remain: %v", ids)
	}

	// A renamed file is a new source: its chunks get new ids, the old ones go.
	old := f.idsOf(t, "docs/shipping.md")
	if err := os.Rename(filepath.Join(f.dir, "docs", "shipping.md"), filepath.Join(f.dir, "docs", "delivery.md")); err != nil {
		t.Fatal(err)
	}
	st = f.ingest(t)
	renamed := f.idsOf(t, "docs/delivery.md")
	if st.Added != len(old) || st.Removed != len(old) || len(renamed) != len(old) || len(f.idsOf(t, "docs/shipping.md")) != 0 {
		t.Errorf("after a rename: %+v, %d chunks under the new name, %d before", st, len(renamed), len(old))
	}
	for _, id := range renamed {
		if slices.Contains(old, id) {
			t.Errorf("a renamed file kept chunk id %s of its old name", id)
		}
	}
}

// hitsOf returns the chunks of ids that are not in old, as stored.
func (f *fixture) hitsOf(t *testing.T, ids, old []string) []retrieval.Chunk {
	t.Helper()
	var out []retrieval.Chunk
	hits, err := f.store.Search(t.Context(), unit(embedWidth), f.store.Len(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if slices.Contains(ids, h.ID) && !slices.Contains(old, h.ID) {
			out = append(out, h.Chunk)
		}
	}
	return out
}

func unit(n int) []float32 {
	v := make([]float32, n)
	v[0] = 1
	return v
}

// TestSharedStore checks that two retrievers sharing a store see and
// delete only their own chunks, even over the same files.
func TestSharedStore(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	other := f.retriever(t, "other", retrieval.RerankNone)
	a := f.ingest(t)
	b, err := other.Ingest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if b.Added != a.Added || f.store.Len() != a.Added+b.Added {
		t.Fatalf("second retriever over the same files: %+v, store holds %d", b, f.store.Len())
	}
	if err := os.Remove(filepath.Join(f.dir, "docs", "shipping.md")); err != nil {
		t.Fatal(err)
	}
	st := f.ingest(t)
	if st.Removed == 0 {
		t.Fatalf("kb did not notice the deletion: %+v", st)
	}
	ids, _ := f.store.IDs(t.Context(), retrieval.Filter{retrieval.MetaRetriever: "other"})
	if len(ids) != b.Added {
		t.Errorf("kb's ingest deleted chunks of other: %d left of %d", len(ids), b.Added)
	}
	hits, err := f.r.Search(t.Context(), "shipping detail", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.Metadata[retrieval.MetaRetriever] != "kb" || h.Source == "docs/shipping.md" {
			t.Errorf("kb search returned %s of %s", h.Source, h.Metadata[retrieval.MetaRetriever])
		}
	}
}

func TestSearch(t *testing.T) {
	for _, rerank := range []string{retrieval.RerankNone, retrieval.RerankLexical} {
		t.Run(rerank, func(t *testing.T) {
			f := newFixture(t, rerank)
			f.ingest(t)
			hits, err := f.r.Search(t.Context(), "login detail number b", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != 3 {
				t.Fatalf("default search returned %d hits, TopK is 3", len(hits))
			}
			if hits[0].Source != "docs/sub/login.txt" || !strings.Contains(hits[0].Text, "number b") {
				t.Errorf("best hit is %s %q", hits[0].Source, hits[0].Text)
			}
			if all, _ := f.r.Search(t.Context(), "login", 100); len(all) != f.store.Len() {
				t.Errorf("k=100 returned %d of %d chunks", len(all), f.store.Len())
			}
			if _, err := f.r.Search(t.Context(), "  ", 1); err == nil {
				t.Error("empty query accepted")
			}
		})
	}
}

// TestIngestDeferred checks that what is not built fails with a typed
// deferred error naming itself, and leaves the store alone.
func TestIngestDeferred(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	f.ingest(t)
	n := f.store.Len()
	writeFiles(t, f.dir, map[string]string{"docs/manual.pdf": "%PDF-1.7"})
	e, _ := retrieval.NewGatewayEmbedder(f.gw, "embed")
	tests := []struct {
		name    string
		source  retrieval.Source
		feature string
	}{
		{"pdf file", retrieval.Source{Dir: f.dir, Files: []string{"docs/*"}}, "ingesting .pdf files such as docs/manual.pdf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := retrieval.New(retrieval.Binding{Name: "kb", Source: tc.source, Chunker: mustChunker(t, 100, 0), Embedder: e, Store: f.store, TopK: 1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Ingest(t.Context())
			var de *kind.DeferredError
			if !errors.As(err, &de) || !strings.Contains(de.Feature, tc.feature) {
				t.Fatalf("got %v, want a *kind.DeferredError naming %q", err, tc.feature)
			}
			if f.store.Len() != n {
				t.Errorf("a deferred source changed the store: %d records, was %d", f.store.Len(), n)
			}
		})
	}
}

// TestIngestRefusals checks inputs that must fail without touching the
// store: a source matching nothing (which would otherwise delete the whole
// index), a bad pattern, a file that is not UTF-8.
func TestIngestRefusals(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	f.ingest(t)
	n := f.store.Len()
	writeFiles(t, f.dir, map[string]string{"bin/blob.md": "\xff\xfe\x00"})
	e, _ := retrieval.NewGatewayEmbedder(f.gw, "embed")
	for _, src := range []retrieval.Source{
		{Dir: f.dir, Files: []string{"typo/**/*.md"}},
		{Dir: f.dir, Files: []string{"/etc/*.md"}},
		{Dir: f.dir, Files: []string{"docs/[.md"}},
		{Dir: f.dir},
		{Dir: f.dir, Files: []string{"bin/*.md"}},
	} {
		r, err := retrieval.New(retrieval.Binding{Name: "kb", Source: src, Chunker: mustChunker(t, 100, 0), Embedder: e, Store: f.store, TopK: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Ingest(t.Context()); err == nil {
			t.Errorf("source %+v ingested", src)
		}
		if f.store.Len() != n {
			t.Fatalf("source %+v changed the store", src)
		}
	}
}

// TestIngestBudget checks that embedding is charged to the caller's budget
// through the gateway: a budget too small for the corpus stops the ingest
// with the gateway's typed error before anything is spent beyond it.
func TestIngestBudget(t *testing.T) {
	gw := newGateway(t, gateway.Budget{Name: "tiny", MaxTotalTokens: 50, Scope: gateway.ScopeRun})
	dir := t.TempDir()
	writeFiles(t, dir, corpus())
	store, _ := memory.NewStore(embedWidth, retrieval.DistanceCosine)
	e, err := retrieval.NewGatewayEmbedder(gw, "embed", gateway.WithBudget("tiny", "run-1"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := retrieval.New(retrieval.Binding{Name: "kb", Source: retrieval.Source{Dir: dir, Files: []string{"docs/*.md"}}, Chunker: mustChunker(t, 120, 0), Embedder: e, Store: store, TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Ingest(t.Context())
	var be *gateway.BudgetExceededError
	if !errors.As(err, &be) || be.Budget != "tiny" {
		t.Fatalf("got %v, want a *gateway.BudgetExceededError of tiny", err)
	}
	if store.Len() != 0 {
		t.Errorf("a refused embedding stored %d chunks", store.Len())
	}

	// The same through the context, as an agent's search would be charged.
	e2, _ := retrieval.NewGatewayEmbedder(gw, "embed")
	r2, _ := retrieval.New(retrieval.Binding{Name: "kb", Source: retrieval.Source{Dir: dir, Files: []string{"docs/*.md"}}, Chunker: mustChunker(t, 120, 0), Embedder: e2, Store: store, TopK: 1})
	ctx := gateway.ContextWithBudget(t.Context(), "tiny", "run-2")
	if _, err := r2.Ingest(ctx); !errors.As(err, &be) {
		t.Errorf("budget on the context: %v", err)
	}
	if _, err := r2.Search(ctx, "refunds", 1); err != nil {
		t.Errorf("a small query within the budget: %v", err)
	}
	s, _ := gw.Spend(t.Context())
	for _, a := range s.ByAccount {
		if spent := a.Spent.Tokens > 0; spent != (a.Account.Key == "run-2") {
			t.Errorf("account %+v: only the query of run-2 should be charged", a)
		}
	}
}

// TestIngestCostOnLedger checks that every embedded chunk is priced from
// the pinned cost profile and recorded under the embedding alias.
func TestIngestCostOnLedger(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	st := f.ingest(t)
	s := f.spend(t)
	hits, _ := f.store.Search(t.Context(), unit(embedWidth), st.Added, nil)
	var tokens int64
	for _, h := range hits {
		tokens += gateway.EstimateTokens(retrieval.EmbedText(h.Chunk))
	}
	if s.Total.Tokens != tokens || len(s.ByAlias) != 1 || s.ByAlias[0].Name != "embed" {
		t.Fatalf("ledger: %+v, want %d tokens under embed", s, tokens)
	}
	want := gateway.Price(gateway.CostProfile{InputPer1kUSD: 0.02}, gateway.Usage{InputTokens: tokens})
	if s.Total.NanoUSD < want.NanoUSD || s.Total.NanoUSD > want.NanoUSD+s.Calls {
		t.Errorf("charged %d nano-USD, the pinned price of %d tokens is %d", s.Total.NanoUSD, tokens, want.NanoUSD)
	}
}

type badEmbedder struct {
	dims, extra int
	err         error
	vector      []float32 // returned for every text instead of a unit vector
}

func (b badEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if b.err != nil {
		return nil, b.err
	}
	out := make([][]float32, len(texts)+b.extra)
	for i := range out {
		out[i] = unit(b.dims)
		if b.vector != nil {
			out[i] = b.vector
		}
	}
	return out, nil
}
func (b badEmbedder) Dimensions() int { return b.dims }
func (b badEmbedder) Model() string   { return "bad" }

func TestHostileEmbedder(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, corpus())
	store, _ := memory.NewStore(4, retrieval.DistanceCosine)
	src := retrieval.Source{Dir: dir, Files: []string{"docs/*.md"}}
	boom := errors.New("boom")
	nan := float32(math.NaN())
	for _, e := range []badEmbedder{
		{dims: 4, extra: 1}, {dims: 4, extra: -1}, {dims: 4, err: boom},
		{dims: 4, vector: []float32{1, 0, 0}}, {dims: 4, vector: []float32{nan, 0, 0, 1}}, {dims: 4, vector: []float32{0, 0, 0, 0}},
	} {
		r, err := retrieval.New(retrieval.Binding{Name: "kb", Source: src, Chunker: mustChunker(t, 100, 0), Embedder: e, Store: store, TopK: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Ingest(t.Context()); err == nil || (e.err != nil && !errors.Is(err, boom)) {
			t.Errorf("embedder %+v: %v", e, err)
		}
		if _, err := r.Search(t.Context(), "x", 1); err == nil {
			t.Errorf("embedder %+v: search succeeded", e)
		}
	}
	if store.Len() != 0 {
		t.Errorf("a hostile embedder left %d records", store.Len())
	}
	_, err := retrieval.New(retrieval.Binding{Name: "kb", Source: src, Chunker: mustChunker(t, 100, 0), Embedder: badEmbedder{dims: 5}, Store: store, TopK: 1})
	var de *retrieval.DimensionError
	if !errors.As(err, &de) || de.Got != 5 || de.Want != 4 {
		t.Errorf("embedder of width 5 over a store of width 4: %v", err)
	}
	if _, err := retrieval.New(retrieval.Binding{}); err == nil || !strings.Contains(err.Error(), "no chunker") || !strings.Contains(err.Error(), "topK") {
		t.Errorf("empty binding: %v", err)
	}
}

// brokenKind is a store kind whose store cannot be opened.
type brokenKind struct{}

func (brokenKind) StoreKind() string { return "broken" }
func (brokenKind) InMemory() bool    { return false }
func (brokenKind) OpenVectorStore(context.Context, kind.Env, string, retrieval.Distance, int) (retrieval.VectorStore, error) {
	return nil, errors.New("the broken kind never opens")
}

// recordingKind is a store kind that keeps what it was asked to open, in
// memory.
type recordingKind struct{ opened *[]string }

func (recordingKind) StoreKind() string { return "recording" }
func (recordingKind) InMemory() bool    { return false }
func (k recordingKind) OpenVectorStore(_ context.Context, _ kind.Env, name string, d retrieval.Distance, dims int) (retrieval.VectorStore, error) {
	*k.opened = append(*k.opened, fmt.Sprintf("%s %s %d", name, d, dims))
	return memory.NewStore(dims, d)
}

func TestBuild(t *testing.T) {
	gw := newGateway(t)
	stores := []retrieval.StoreConfig{{Name: "kb", Kind: memory.Kind{}, Distance: retrieval.DistanceCosine}, {Name: "x", Kind: brokenKind{}}}
	good := retrieval.Config{Name: "kb", Source: retrieval.Source{Files: []string{"*.md"}}, ChunkSize: 100, ChunkOverlap: 10, EmbedModel: "embed", Store: "kb", TopK: 2, Rerank: "lexical"}
	rs, err := retrieval.Build(t.Context(), gw, stores[:1], []retrieval.Config{good}, retrieval.BuildOptions{})
	if err != nil || rs["kb"] == nil {
		t.Fatalf("Build: %v", err)
	}
	bad := []retrieval.Config{
		good,
		{Name: "narrow", EmbedModel: "embed-small", Store: "kb", ChunkSize: 100, TopK: 1},
		{Name: "chat", EmbedModel: "chat", Store: "kb", ChunkSize: 100, TopK: 1},
		{Name: "nostore", EmbedModel: "embed", Store: "missing", ChunkSize: 100, TopK: 1},
		{Name: "x", EmbedModel: "embed", Store: "x", ChunkSize: 100, TopK: 1},
		{Name: "rr", EmbedModel: "embed", Store: "kb", ChunkSize: 100, TopK: 1, Rerank: "cross"},
		{Name: "chunks", EmbedModel: "embed", Store: "kb", ChunkSize: 10, ChunkOverlap: 10, TopK: 1},
	}
	_, err = retrieval.Build(t.Context(), gw, stores, bad, retrieval.BuildOptions{})
	for _, want := range []string{`retriever "narrow" writes 16-wide vectors (model "embed-small") into store "kb"`, "not an embedding model", `unknown store "missing"`, `opening store "x": the broken kind never opens`, `unknown rerank kind "cross"`, "overlap must be"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build error %v does not report %q", err, want)
		}
	}
	// A team's own kind opens its store once, with the width its
	// retrievers embed with and the default distance.
	var opened []string
	own := []retrieval.StoreConfig{{Name: "own", Kind: recordingKind{&opened}}}
	two := []retrieval.Config{
		{Name: "a", EmbedModel: "embed", Store: "own", ChunkSize: 100, TopK: 1},
		{Name: "b", EmbedModel: "embed", Store: "own", ChunkSize: 100, TopK: 1},
	}
	if _, err := retrieval.Build(t.Context(), gw, own, two, retrieval.BuildOptions{}); err != nil || !slices.Equal(opened, []string{fmt.Sprintf("own cosine %d", embedWidth)}) {
		t.Errorf("Build with a kind of one's own: %v, opened %q", err, opened)
	}
}

// TestConcurrentIngestSearch ingests from two goroutines while others
// search: ingests of one retriever serialise (the second sees the first's
// work as unchanged), searches never fail once the first chunks are in, and
// the race detector watches the rest.
func TestConcurrentIngestSearch(t *testing.T) {
	f := newFixture(t, retrieval.RerankLexical)
	stats := make(chan retrieval.IngestStats, 2)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			st, err := f.r.Ingest(t.Context())
			if err != nil {
				errs <- err
			}
			stats <- st
		})
	}
	other := make(chan struct{})
	go func() {
		defer close(other)
		for range 20 {
			if _, err := f.r.Search(t.Context(), "refunds detail", 3); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	<-other
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	a, b := <-stats, <-stats
	if a.Added == 0 {
		a, b = b, a
	}
	if a.Added == 0 || b.Added != 0 || b.Unchanged != a.Added {
		t.Errorf("serial ingests: %+v then %+v", a, b)
	}
}

func TestIngestCanceled(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.r.Ingest(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ingest on a canceled context: %v", err)
	}
	if f.store.Len() != 0 {
		t.Errorf("a canceled ingest stored %d chunks", f.store.Len())
	}
}

// TestIngestProgress checks that IngestWith reports the new chunks only:
// a first ingest counts from 0 to every chunk it adds, ending at the total,
// and a second, unchanged one reports (0, 0) and nothing else.
func TestIngestProgress(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	var calls [][2]int
	st, err := f.r.IngestWith(t.Context(), retrieval.IngestOptions{Progress: func(done, total int) {
		calls = append(calls, [2]int{done, total})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 2 || calls[0] != [2]int{0, st.Added} || calls[len(calls)-1] != [2]int{st.Added, st.Added} {
		t.Fatalf("progress of a first ingest adding %d chunks: %v", st.Added, calls)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] <= calls[i-1][0] {
			t.Errorf("progress went from %v to %v", calls[i-1], calls[i])
		}
	}
	calls = nil
	if _, err := f.r.IngestWith(t.Context(), retrieval.IngestOptions{Progress: func(done, total int) {
		calls = append(calls, [2]int{done, total})
	}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, [][2]int{{0, 0}}) {
		t.Errorf("progress of an unchanged ingest: %v, want [[0 0]]", calls)
	}
}
