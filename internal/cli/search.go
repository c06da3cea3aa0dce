package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/retrieval"
)

type searchFlags struct {
	tags     []string
	k        int
	progress string
}

// snippetRunes is how much of a hit's text search prints.
const snippetRunes = 240

func newSearch(s *streams) *cobra.Command {
	var f searchFlags
	cmd := &cobra.Command{
		Use:   "search FILE RETRIEVER QUERY",
		Short: "Search a retriever and print the top hits with scores and sources",
		Long: `Search embeds the query with the retriever's embedding model, asks its store
for the best chunks (reranked when the retriever says so) and prints them best
first: the rank, the score, the source file with the chunk's byte range, the
heading trail, and the start of the text. It searches what agents searching
the retriever (the tool search_<retriever>) and retrieval evals see.

A pgvector store is searched as aidgen index left it. A memory store starts
empty in every process (` + memoryStoreNote + `), so search
ingests its sources first, which embeds them all.

Scores are similarities, higher is better: cosine similarity for a cosine
store; with rerank "lexical", the fused rank score of vector and BM25 order.

Exit status: 0 searched (even with no hits), 1 the search failed,
2 configuration error.`,
		Example: `  # Search the support-desk help centre.
  aidgen search examples/support-desk/app.cue kb "how long do I have to ask for a refund?"

  # The ten best chunks instead of the retriever's topK.
  aidgen search app.cue kb "reset my password" -k 10`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 3 {
				return usageErr(errors.New(`search needs an application file, a retriever and a query; usage: aidgen search FILE RETRIEVER "QUERY"`))
			}
			if strings.TrimSpace(args[2]) == "" {
				return usageErr(errors.New("the query is empty; say what to search for"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkProgressFlag(f.progress); err != nil {
				return err
			}
			if cmd.Flags().Changed("k") && (f.k < 1 || f.k > 100) {
				return usageErr(fmt.Errorf("-k must be between 1 and 100, not %d; leave it out to use the retriever's topK", f.k))
			}
			return runSearch(cmd.Context(), s, args[0], args[1], args[2], f)
		},
	}
	fl := cmd.Flags()
	tagFlag(cmd, &f.tags)
	fl.IntVarP(&f.k, "k", "k", 0, "how many hits, 1 to 100 (default: the retriever's topK)")
	fl.StringVar(&f.progress, "progress", "auto", "progress of ingesting a memory store: auto (a bar on a terminal), bar, lines or none")
	return cmd
}

func runSearch(ctx context.Context, s *streams, path, name, query string, f searchFlags) error {
	ra, err := openRetrievers(ctx, s, path, f.tags, []string{name})
	if err != nil {
		return err
	}
	defer ra.close()
	r := ra.app.Retrievers[name]
	if ra.inMemory(name) {
		stats, err := ra.ingest(ctx, s, name, f.progress)
		if err != nil {
			return err
		}
		fmt.Fprintf(s.err, "aidgen: %s: store %q is in memory (%s); ingested %s first: %s\n", name, ra.store(name).Name, memoryStoreNote, plural(stats.Files, "file", "files"), diffWords(stats))
	}
	hits, err := r.Search(ctx, query, f.k)
	if err != nil {
		return &exitError{code: ExitInvalid, err: fmt.Errorf("searching %s: %w", name, err)}
	}
	if len(hits) == 0 {
		fmt.Fprintf(s.out, "no hits\n")
		if !ra.inMemory(name) {
			fmt.Fprintf(s.err, "aidgen: %s: the store holds nothing for this retriever; index it first with: aidgen index %s --retriever %s\n", name, path, name)
		}
		return nil
	}
	printHits(s, hits)
	return nil
}

// printHits prints hits best first, each as a header line and an indented
// snippet of its text on one line.
func printHits(s *streams, hits []retrieval.Hit) {
	for i, h := range hits {
		fmt.Fprintf(s.out, "%d. %.4f  %s:%d-%d", i+1, h.Score, h.Source, h.Start, h.End)
		if h.Heading != "" {
			fmt.Fprintf(s.out, "  %s", h.Heading)
		}
		fmt.Fprintf(s.out, "\n   %s\n", snippet(h.Text, snippetRunes))
	}
}

// snippet collapses white space and cuts text to at most n runes, marking
// a cut with an ellipsis.
func snippet(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(text) <= n {
		return text
	}
	runes := []rune(text)
	return strings.TrimRight(string(runes[:n]), " ") + "…"
}
