package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Searcher is what an agent's search_<retriever> tool calls: the best
// passages for a query, best first. *retrieval.Retriever is one, so an
// application's retrievers are wired in as they are; a team with its own
// search (another index, a service) implements it, and tests stub it with
// a SearchFunc.
//
// The interface speaks retrieval.Hit rather than a type of this package so
// that there is one description of a passage (source path, offsets, heading
// trail, text, score) across retrieval, its metrics and the agents, and no
// adapter to keep in step with it.
//
// k is how many passages the model asked for, from 1 to MaxSearchK, or 0
// when it did not say: the searcher's own default (a retriever's topK).
// The context carries the run's budget (gateway.ContextWithBudget) and the
// tool's timeout: a searcher that embeds the query through the gateway is
// charged to the agent's budget like its model calls, and must return when
// the context ends. A Searcher must be safe for concurrent use: one
// retriever may serve several agents, and several calls of one answer.
//
// An error of the searcher becomes an error observation the model reads,
// except a budget breach (a *gateway.BudgetExceededError in the chain),
// which follows the agent's budget policy as far as it can apply. An agent
// that fails on a breach, or that has already degraded, stops: the run ends
// budget_exceeded with a *BudgetExceededError naming the tool, as a refused
// model call would. An agent that may still degrade does not stop; the call
// becomes an error observation of kind KindBudgetExceeded. The ladder is of
// chat models: a lower rung would not make the embedding any cheaper, so
// retrying the search would only breach again. The run goes on without the
// passages, and its next model call meets the exhausted budget, where
// degrading does help.
//
// A Searcher that also has a method Description() string describes its
// corpus to the model; otherwise the tool's description names the
// retriever.
type Searcher interface {
	Search(ctx context.Context, query string, k int) ([]retrieval.Hit, error)
}

// SearchFunc adapts a function to Searcher.
type SearchFunc func(ctx context.Context, query string, k int) ([]retrieval.Hit, error)

// Search calls f.
func (f SearchFunc) Search(ctx context.Context, query string, k int) ([]retrieval.Hit, error) {
	return f(ctx, query, k)
}

// MaxSearchK is the most passages one search_<retriever> call may ask for:
// enough to survey a topic, few enough that the observation stays a small
// part of the model's context.
const MaxSearchK = 20

// searchSchema is the arguments of every search_ tool.
var searchSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"query":{"type":"string","minLength":1,"description":"What to look for, in the words the documents would use."},` +
	`"k":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(MaxSearchK) + `,"description":"How many passages to return; omit for the retriever's default."}},` +
	`"required":["query"],"additionalProperties":false}`)

// searchDescription is the description the model reads for a retriever's
// tool.
func searchDescription(name string, s Searcher) string {
	const how = " Returns JSON: the best passages first, each with its source file, heading, score and text; cite a passage by its \"cite\" value (source#heading)."
	if d, ok := s.(interface{ Description() string }); ok {
		if desc := strings.TrimSpace(d.Description()); desc != "" {
			return desc + how
		}
	}
	return fmt.Sprintf("Search the documents of retriever %q for passages relevant to a query.", name) + how
}

// searchResult is the observation of a search_ call.
type searchResult struct {
	Query    string          `json:"query"`
	Passages []searchPassage `json:"passages"`
}

// searchPassage is one passage as the model reads it.
type searchPassage struct {
	// Cite is how an answer refers to the passage: the source path and,
	// when the passage is under a heading, "#" and the innermost heading.
	Cite    string `json:"cite"`
	Source  string `json:"source"`
	Heading string `json:"heading,omitempty"`
	// ID is the chunk's content hash, what citation metrics match.
	ID string `json:"id,omitempty"`
	// Start and End are the passage's byte offsets in its source.
	Start int `json:"start"`
	End   int `json:"end"`
	// Score is nil when the searcher gave a non-finite score, which JSON
	// cannot carry.
	Score *float64 `json:"score"`
	Text  string   `json:"text"`
}

// citeOf returns how a passage is cited: source#innermost-heading.
func citeOf(h retrieval.Hit) string {
	if h.Heading == "" {
		return h.Source
	}
	heading := h.Heading
	if i := strings.LastIndex(heading, " > "); i >= 0 {
		heading = heading[i+len(" > "):]
	}
	return h.Source + "#" + heading
}

// roundScore keeps four significant digits: enough to order passages, and
// fewer tokens than a float64's seventeen.
func roundScore(s float64) *float64 {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return nil
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(s, 'g', 4, 64), 64)
	return &r
}

// budgetKey is the scope key the agent's calls are charged under: the run
// id, the thread id (a run without a thread is its own thread) or none.
func budgetKey(st *runState) string {
	switch st.agent.budgetScope {
	case gateway.ScopeRun:
		return st.id
	case gateway.ScopeThread:
		if st.threadID != "" {
			return st.threadID
		}
		return st.id
	}
	return ""
}

// search runs one search_ call and sets its observation. Arguments are
// already validated against searchSchema. A budget breach follows the
// policy Searcher documents.
func (r *Runtime) search(ctx context.Context, st *runState, t *tool, args json.RawMessage, c *ToolCallRecord) error {
	var in struct {
		Query string `json:"query"`
		K     int    `json:"k"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		c.observe(fmt.Sprintf("error: invalid arguments for %s: %v", c.Name, err), KindInvalidArguments)
		return nil
	}
	if strings.TrimSpace(in.Query) == "" {
		c.observe(fmt.Sprintf("error: invalid arguments for %s: the query is blank", c.Name), KindInvalidArguments)
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	d := st.agent
	if d.budget != "" {
		sctx = gateway.ContextWithBudget(sctx, d.budget, budgetKey(st))
	}
	sctx = context.WithValue(sctx, runInfoKey{}, &RunInfo{RunID: st.id, Agent: d.spec.Name, ThreadID: st.threadID, UserID: st.userID, Tenant: st.caller.Tenant, CallID: c.ID})
	hits, err := safeSearch(sctx, t.searcher, in.Query, in.K)
	var be *gateway.BudgetExceededError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return fmt.Errorf("run %s: tool %s: %w", st.id, c.Name, ctx.Err())
	case errors.As(err, &be):
		if d.spec.OnBudgetExhausted == BudgetDegrade && !st.degraded {
			r.logger.InfoContext(ctx, "search refused by the budget", "run", st.id, "agent", d.spec.Name, "tool", c.Name, "err", err)
			c.observe(fmt.Sprintf("error: %s: the budget is exhausted, no search was made: %v", c.Name, err), KindBudgetExceeded)
			return nil
		}
		return &BudgetExceededError{RunID: st.id, Agent: d.spec.Name, Alias: st.alias, Tool: c.Name, Err: err}
	case errors.Is(sctx.Err(), context.DeadlineExceeded):
		c.observe(fmt.Sprintf("error: tool %s timed out after %v", c.Name, t.timeout), KindTimeout)
		return nil
	default:
		c.observe(fmt.Sprintf("error: tool %s failed: %v", c.Name, err), KindToolFailed)
		return nil
	}
	if in.K > 0 && len(hits) > in.K {
		hits = hits[:in.K] // a searcher that returns more than asked does not flood the context
	}
	res := searchResult{Query: in.Query, Passages: make([]searchPassage, len(hits))}
	for i, h := range hits {
		res.Passages[i] = searchPassage{
			Cite: citeOf(h), Source: h.Source, Heading: h.Heading, ID: h.ID,
			Start: h.Start, End: h.End, Score: roundScore(h.Score), Text: h.Text,
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		c.observe(fmt.Sprintf("error: tool %s: encode passages: %v", c.Name, err), KindToolFailed)
		return nil
	}
	c.observe(string(b), "")
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(semconv.GenAIRetrievalDocumentsKey.String(retrievalDocuments(hits)))
	}
	return nil
}

// retrievalDocuments renders gen_ai.retrieval.documents: each hit's id
// (the chunk id, or source#offset for a searcher without ids) and score.
// Texts and the query stay out of the span: they may be sensitive.
func retrievalDocuments(hits []retrieval.Hit) string {
	type doc struct {
		ID    string   `json:"id"`
		Score *float64 `json:"score"`
	}
	docs := make([]doc, len(hits))
	for i, h := range hits {
		id := h.ID
		if id == "" {
			id = h.Source + "#" + strconv.Itoa(h.Start)
		}
		docs[i] = doc{ID: id, Score: roundScore(h.Score)}
	}
	b, _ := json.Marshal(docs) // strings and finite numbers only
	return string(b)
}

// safeSearch runs a searcher, turning a panic into an error.
func safeSearch(ctx context.Context, s Searcher, query string, k int) (hits []retrieval.Hit, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return s.Search(ctx, query, k)
}
