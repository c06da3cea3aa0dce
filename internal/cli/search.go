package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/retrieval"
)

type searchFlags struct {
	tags        []string
	k           int
	progress    string
	json        bool
	skipInvalid bool
}

// snippetRunes is how much of a hit's text search prints.
const snippetRunes = 240

func newSearch(s *streams) *cobra.Command {
	var f searchFlags
	cmd := &cobra.Command{
		Use:   "search FILE RETRIEVER QUERY",
		Short: "Search a retriever and print the top hits with scores and sources",
		Long: `Search ranks the retriever's chunks for the query as its retrieval mode says
(hybrid by default: the BM25 lexical index and the vectors, each searched to
the ranking's depth and fused by reciprocal rank) and prints the best first:
the rank, the fused score, the hit's rank in the lexical and in the vector
list ("-" when it was not in one), the source file with the chunk's byte
range, the heading trail, and the start of the text. Control characters and
terminal escape sequences in documents are not printed. It searches what
agents searching the retriever (the tool search_<retriever>) and retrieval
evals see.

--json prints one JSON object instead (stdout holds nothing else):
retriever, query, k, mode, and hits, one object per hit with rank, id,
document (the source file), source (file:start-end), start and end (byte
offsets), heading, score, lexical_rank and vector_rank (0 when absent from
that list), and text (the whole chunk).

A pgvector store is searched as aidgen index left it. A memory store starts
empty in every process (` + memoryStoreNote + `), so search
ingests its sources first, embedding the chunks the embedding cache does
not hold.

` + embeddingCacheNote + `

Scores are higher-is-better: the fused score in hybrid mode (reciprocal
rank, or weighted), BM25 in lexical mode, the similarity (cosine for a
cosine store) in vector mode; with rerank "lexical", the reranker's fused
rank score.

Exit status: 0 searched (even with no hits), 1 the search failed,
2 configuration error.`,
		Example: `  # Search the support-desk help centre.
  aidgen search examples/support-desk/app.cue kb "how long do I have to ask for a refund?"

  # The ten best chunks instead of the retriever's topK.
  aidgen search app.cue kb "reset my password" -k 10

  # The hits as JSON, for a script.
  aidgen search app.cue kb "reset my password" --json | jq '.hits[].document'`,
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
	fl.BoolVar(&f.json, "json", false, "print the hits as one JSON object")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "when ingesting a memory store, skip the files that cannot be read as text instead of failing")
	return cmd
}

func runSearch(ctx context.Context, s *streams, path, name, query string, f searchFlags) error {
	ra, err := openRetrievers(ctx, s, path, f.tags, []string{name}, f.skipInvalid)
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
	if f.json {
		if len(hits) == 0 && !ra.inMemory(name) {
			fmt.Fprintf(s.err, "aidgen: %s: no hits; if the store holds nothing for this retriever, index it first with: aidgen index %s --retriever %s\n", name, path, name)
		}
		return printHitsJSON(s, name, query, r, f.k, hits)
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

// printHits prints hits best first, each as a header line (rank, score,
// lexical and vector rank, source, heading) and an indented snippet of its
// text on one line. Documents are data from anywhere: their control
// characters and escape sequences are not printed.
func printHits(s *streams, hits []retrieval.Hit) {
	for i, h := range hits {
		fmt.Fprintf(s.out, "%d. %.4f  lexical %s  vector %s  %s:%d-%d", i+1, h.Score, rankWord(h.LexicalRank), rankWord(h.VectorRank), printable(h.Source), h.Start, h.End)
		if h.Heading != "" {
			fmt.Fprintf(s.out, "  %s", printable(h.Heading))
		}
		fmt.Fprintf(s.out, "\n   %s\n", snippet(printable(h.Text), snippetRunes))
	}
}

// rankWord is a stage rank as search prints it: "-" when the hit was not
// in that stage's list.
func rankWord(r int) string {
	if r == 0 {
		return "-"
	}
	return strconv.Itoa(r)
}

// hitJSON is one hit of search --json.
type hitJSON struct {
	Rank        int     `json:"rank"`
	ID          string  `json:"id"`
	Document    string  `json:"document"`
	Source      string  `json:"source"`
	Start       int     `json:"start"`
	End         int     `json:"end"`
	Heading     string  `json:"heading"`
	Score       float64 `json:"score"`
	LexicalRank int     `json:"lexical_rank"`
	VectorRank  int     `json:"vector_rank"`
	Text        string  `json:"text"`
}

// printHitsJSON prints the hits as one JSON object.
func printHitsJSON(s *streams, name, query string, r *retrieval.Retriever, k int, hits []retrieval.Hit) error {
	if k <= 0 {
		k = r.TopK()
	}
	out := struct {
		Retriever string    `json:"retriever"`
		Query     string    `json:"query"`
		K         int       `json:"k"`
		Mode      string    `json:"mode"`
		Hits      []hitJSON `json:"hits"`
	}{Retriever: name, Query: query, K: k, Mode: r.Ranking().Mode, Hits: make([]hitJSON, len(hits))}
	for i, h := range hits {
		score := h.Score
		if math.IsNaN(score) || math.IsInf(score, 0) {
			score = 0 // JSON has no NaN; stores rank such hits last
		}
		out.Hits[i] = hitJSON{
			Rank: i + 1, ID: h.ID, Document: h.Source, Source: fmt.Sprintf("%s:%d-%d", h.Source, h.Start, h.End),
			Start: h.Start, End: h.End, Heading: h.Heading, Score: score,
			LexicalRank: h.LexicalRank, VectorRank: h.VectorRank, Text: h.Text,
		}
	}
	enc := json.NewEncoder(s.out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return &exitError{code: ExitInvalid, err: fmt.Errorf("writing the hits: %w", err)}
	}
	return nil
}

// printable removes from text what a terminal would act on rather than
// show: ANSI escape sequences (CSI "ESC [ … final", OSC "ESC ] … BEL or
// ESC \", and two-byte "ESC x"), the C0 and C1 control characters other
// than tab and newline, DEL, and the Unicode bidirectional overrides and
// isolates that reorder what is shown. Invalid UTF-8 becomes U+FFFD.
func printable(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == 0x1b: // ESC
			i += escapeLen(text[i:])
			continue
		case r == 0x9b: // CSI as one C1 character
			i += size
			for i < len(text) && (text[i] < 0x40 || text[i] > 0x7e) {
				i++
			}
			if i < len(text) {
				i++
			}
			continue
		case r == '\t' || r == '\n':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			i += size
			continue
		case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
			i += size
			continue
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
			i++
			continue
		}
		b.WriteString(text[i : i+size])
		i += size
	}
	return b.String()
}

// escapeLen is the length of the escape sequence at the start of s, which
// starts with ESC.
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[': // CSI: parameters and intermediates, then a final byte
		i := 2
		for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
			i++
		}
		return min(i+1, len(s))
	case ']', 'P', '_', '^', 'X': // OSC, DCS, APC, PM, SOS: up to BEL or ST
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	return 2
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
