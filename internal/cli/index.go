package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/serve/postgres"
)

// memoryStoreNote is what index and search say about a store that lives in
// memory, in their help and their output.
const memoryStoreNote = "memory stores are rebuilt on every command"

type indexFlags struct {
	tags        []string
	retrievers  []string
	progress    string
	skipInvalid bool
}

func newIndex(s *streams) *cobra.Command {
	var f indexFlags
	cmd := &cobra.Command{
		Use:   "index FILE",
		Short: "Ingest the retrievers' sources into their stores and print what changed",
		Long: `Index brings the store of every retriever of an application (or of those named
with --retriever) up to date with its sources: it reads and chunks the files,
embeds only the chunks the store does not hold yet, and deletes the chunks of
files that changed or vanished. Chunk ids are content hashes, so indexing
unchanged sources embeds nothing and prints "0 added, N unchanged, 0 removed".

A pgvector store keeps the index in PostgreSQL, read from the DSN in the
store's dsnEnv; indexing it again later changes only what changed. A memory
store lives in this process only: ` + memoryStoreNote + `, so
index on a memory store shows what would be ingested and what it costs, and
aidgen search and aidgen eval ingest such a store themselves.

Embedding calls go through the gateway like every model call: pinned, retried,
priced; the cost is printed at the end. The same ingest keeps the retriever's
lexical (BM25) index, with the same chunk ids.

A file that cannot be read as text (not UTF-8, a NUL byte, a PDF) fails the
ingest, which names every such file at once and stores nothing; with
--skip-invalid (or onInvalid: "skip" on the retriever's source) the other
files are indexed and the skipped ones listed on stderr.

` + embeddingCacheNote + `

Exit status: 0 indexed, 1 an ingest failed (what was stored before the
failure is kept; running index again completes it), 2 configuration error.`,
		Example: `  # Index every retriever of the support-desk example.
  aidgen index examples/support-desk/app.cue

  # Index one retriever of an application whose store is pgvector.
  DATABASE_URL=postgres://localhost/app aidgen index app.cue --retriever kb`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(errors.New("index needs exactly one application file; usage: aidgen index FILE [--retriever NAME]"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkProgressFlag(f.progress); err != nil {
				return err
			}
			ra, err := openRetrievers(cmd.Context(), s, args[0], f.tags, f.retrievers, f.skipInvalid)
			if err != nil {
				return err
			}
			defer ra.close()
			return ra.index(cmd.Context(), s, f.progress)
		},
	}
	fl := cmd.Flags()
	tagFlag(cmd, &f.tags)
	fl.StringSliceVar(&f.retrievers, "retriever", nil, "index only the named retrievers (repeatable or comma-separated)")
	fl.StringVar(&f.progress, "progress", "auto", "progress display: auto (a bar on a terminal), bar, lines or none")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "index the files that are text and list the others (not UTF-8, binary, PDF) instead of failing")
	return cmd
}

func checkProgressFlag(mode string) error {
	switch mode {
	case "auto", "bar", "lines", "none":
		return nil
	}
	return usageErr(fmt.Errorf("--progress must be auto, bar, lines or none, not %q", mode))
}

// retrieverApp is what index and search assemble from an application file:
// its gateway and the named retrievers with their stores, and nothing
// else, so that an application whose tools are Go code, or whose service
// keeps its state in PostgreSQL, can be indexed by aidgen, which has
// neither.
type retrieverApp struct {
	app   *app.App
	desc  app.Description
	names []string // the retrievers, in the description's order
	// closeCache bounds the embedding cache.
	closeCache func()
}

// close closes what the stores' kinds opened (pgvector pools) and bounds
// the embedding cache.
func (ra *retrieverApp) close() {
	_ = ra.app.Close()
	ra.closeCache()
}

// openRetrievers loads, lowers and assembles the retrieval part of an
// application. only names the retrievers wanted; empty means all of them.
// skipInvalid makes every retriever skip the files it cannot read as text,
// as onInvalid: "skip" does.
func openRetrievers(ctx context.Context, s *streams, path string, tags, only []string, skipInvalid bool) (*retrieverApp, error) {
	full, err := loadDescription(s, path, tags)
	if err != nil {
		return nil, err
	}
	var all []string
	for _, r := range full.Retrievers {
		all = append(all, r.Name)
	}
	if len(all) == 0 {
		return nil, usageErr(fmt.Errorf("%s defines no retrievers", path))
	}
	names := all
	if len(only) > 0 {
		for _, n := range only {
			if !slices.Contains(all, n) {
				return nil, usageErr(fmt.Errorf("%s has no retriever %q; retrievers: %s", path, n, strings.Join(all, ", ")))
			}
		}
		names = slices.DeleteFunc(slices.Clone(all), func(n string) bool { return !slices.Contains(only, n) })
	}
	desc := retrievalOnly(full, names)
	if skipInvalid {
		for i := range desc.Retrievers {
			desc.Retrievers[i].Source.OnInvalid = retrieval.OnInvalidSkip
		}
	}
	opts, closeCache := commandOptions(s, desc)
	a, err := app.Assemble(ctx, desc, opts)
	if err != nil {
		closeCache()
		return nil, usageErr(err)
	}
	return &retrieverApp{app: a, desc: desc, names: names, closeCache: closeCache}, nil
}

// commandOptions are the options of a command that is not a replica of
// the service: index, search and eval keep runs and spend in memory,
// whatever the service's state says, while retrievers' stores and agents'
// memory are the service's own, opened as the service opens them (by
// their kinds, and postgres.OpenMemory), and embeddings are cached on disk
// (embeddingCache). closeCache bounds the
// cache.
func commandOptions(s *streams, desc app.Description) (opts app.Options, closeCache func()) {
	cache, closeCache := embeddingCache(s, desc)
	return app.Options{
		Ledger:         gateway.NewMemoryLedger(),
		RunStore:       agents.NewInMemoryStore(),
		EmbeddingCache: cache,
		OpenMemory:     postgres.OpenMemory,
	}, closeCache
}

// retrievalOnly keeps of a description what the named retrievers need: the
// pinned embedding models they name with their providers, and their
// stores. Agents, tools, evals and the service's state are left out, so
// that nothing else is opened or asked for (an API key of a provider the
// retrievers do not use, say).
func retrievalOnly(d app.Description, names []string) app.Description {
	out := app.Description{Name: d.Name, Version: d.Version, Dir: d.Dir}
	aliases := map[string]bool{}
	stores := map[string]bool{}
	for _, r := range d.Retrievers {
		if slices.Contains(names, r.Name) {
			out.Retrievers = append(out.Retrievers, r)
			aliases[r.EmbedModel] = true
			stores[r.Store] = true
		}
	}
	providers := map[string]bool{}
	for _, m := range d.Models {
		if aliases[m.Alias] {
			out.Models = append(out.Models, m)
			providers[m.Spec.Provider] = true
		}
	}
	for _, p := range d.Providers {
		if providers[p.Name] {
			out.Providers = append(out.Providers, p)
		}
	}
	for _, s := range d.Stores {
		if stores[s.Name] {
			out.Stores = append(out.Stores, s)
		}
	}
	return out
}

// store returns the description of a retriever's store.
func (ra *retrieverApp) store(retriever string) retrieval.StoreConfig {
	for _, r := range ra.desc.Retrievers {
		if r.Name == retriever {
			for _, s := range ra.desc.Stores {
				if s.Name == r.Store {
					return s
				}
			}
		}
	}
	return retrieval.StoreConfig{}
}

// inMemory reports whether a retriever's store lives in this process.
func (ra *retrieverApp) inMemory(retriever string) bool {
	return ra.store(retriever).InMemory()
}

// index ingests every retriever and prints each diff, then the cost.
func (ra *retrieverApp) index(ctx context.Context, s *streams, progressMode string) error {
	for _, name := range ra.names {
		stats, err := ra.ingest(ctx, s, name, progressMode)
		if err != nil {
			return err
		}
		st := ra.store(name)
		fmt.Fprintf(s.out, "%s: %s: %s (store %s, %s)\n", name, plural(stats.Files, "file", "files"), diffWords(stats), st.Name, storeKind(st))
		if ra.inMemory(name) {
			fmt.Fprintf(s.err, "aidgen: %s: store %q is in memory and ends with this command (%s); use a pgvector store to keep the index\n", name, st.Name, memoryStoreNote)
		}
	}
	return ra.printSpend(ctx, s)
}

// diffWords says what an ingest changed.
func diffWords(st retrieval.IngestStats) string {
	return fmt.Sprintf("%d added, %d unchanged, %d removed", st.Added, st.Unchanged, st.Removed)
}

// ingest ingests one retriever, drawing progress on stderr over the
// chunks it embeds.
func (ra *retrieverApp) ingest(ctx context.Context, s *streams, name, progressMode string) (retrieval.IngestStats, error) {
	prog := newProgress(s.err, progressMode, name, 0)
	prog.unit = "chunks"
	stats, err := ra.app.Retrievers[name].IngestWith(ctx, retrieval.IngestOptions{Progress: func(done, total int) {
		if total > 0 {
			prog.update(done, total)
		}
	}})
	prog.done()
	if len(stats.Skipped) > 0 {
		fmt.Fprintf(s.err, "aidgen: %s: skipped %s that cannot be read as text (what the index held of them is kept):\n", name, plural(len(stats.Skipped), "file", "files"))
		for _, f := range stats.Skipped {
			fmt.Fprintf(s.err, "  %s\n", printable(f.String()))
		}
	}
	if err != nil {
		var invalid *retrieval.InvalidFilesError
		if errors.As(err, &invalid) {
			err = fmt.Errorf("%w; or run again with --skip-invalid", err)
		}
		if stats.Added > 0 {
			err = fmt.Errorf("%w (the %s stored before the failure are kept; index again to complete it)", err, plural(stats.Added, "chunk", "chunks"))
		}
		return stats, &exitError{code: ExitInvalid, err: fmt.Errorf("indexing %s: %w", name, err)}
	}
	return stats, nil
}

// storeKind says where a store's rows are: its kind's own words when it
// has them (a pgvector store names its table), else its kind's name.
func storeKind(st retrieval.StoreConfig) string {
	if s, ok := st.Kind.(fmt.Stringer); ok {
		return s.String()
	}
	return st.KindName()
}

// printSpend prints what the embedding calls cost.
func (ra *retrieverApp) printSpend(ctx context.Context, s *streams) error {
	spend, err := ra.app.Gateway.Spend(ctx)
	if err != nil {
		return &exitError{code: ExitInvalid, err: fmt.Errorf("reading the ledger: %w", err)}
	}
	fmt.Fprintf(s.out, "embedding: %s, $%.6f\n", plural(int(spend.Calls), "call", "calls"), spend.Total.USD())
	return nil
}
