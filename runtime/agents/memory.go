package agents

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// MemoryScope says whom a stored memory is about.
type MemoryScope string

// The stored memory scopes. The thread scope is the conversation itself and
// is never written to a MemoryStore.
const (
	// MemoryUser is memory about one user, across threads; its subject is
	// the user id.
	MemoryUser MemoryScope = "user"
	// MemoryGlobal is memory shared by every user of one tenant; its
	// subject is the tenant (kind.Caller.Tenant), empty for the runs of no
	// tenant. A run reads its own tenant's only, so that no tenant reads
	// what was remembered for another.
	MemoryGlobal MemoryScope = "global"
)

// MemoryEntry is one remembered fact.
type MemoryEntry struct {
	// Scope is the entry's scope.
	Scope MemoryScope
	// Subject is the user id for user memory, the tenant for global
	// memory.
	Subject string
	// Text is the fact, as injected into requests.
	Text string
	// Created is when it was added; the store sets it.
	Created time.Time
}

// MemoryStore keeps user and global memory. Agents read it at every model
// call; tools and application code write it (a tool finds the run's user
// with RunInfoFromContext). An in-memory store is provided; a PostgreSQL
// one shares the same contract (package agentstoretest).
type MemoryStore interface {
	// AddMemory appends an entry to a scope's subject.
	AddMemory(ctx context.Context, scope MemoryScope, subject, text string) (MemoryEntry, error)
	// Memories returns a scope's subject's entries, oldest first.
	Memories(ctx context.Context, scope MemoryScope, subject string) ([]MemoryEntry, error)
}

// MemoryStoreKind is implemented by the configuration of a store kind
// (retrieval.StoreKind) that can also hold agents' user and global memory
// and opens it itself. A kind that keeps its stores in PostgreSQL, such as
// pgvector.Kind, is a retrieval.DatabaseKind instead: the application
// opens its memory (app.Options.OpenMemory). A store of a kind in memory
// (retrieval.StoreKind.InMemory) holds it in an InMemoryMemory instead,
// and any other store cannot hold it.
type MemoryStoreKind interface {
	// OpenMemoryStore opens the memory store named store. What it opens
	// for the application's lifetime goes into env.Scope, which closes it.
	OpenMemoryStore(ctx context.Context, env kind.Env, store string) (MemoryStore, error)
}

// InMemoryMemory is a MemoryStore held in this process's memory. It is safe
// for concurrent use.
type InMemoryMemory struct {
	mu      sync.Mutex
	entries map[memKey][]MemoryEntry
}

type memKey struct {
	scope   MemoryScope
	subject string
}

// NewInMemoryMemory returns an empty in-memory memory store.
func NewInMemoryMemory() *InMemoryMemory {
	return &InMemoryMemory{entries: make(map[memKey][]MemoryEntry)}
}

// CheckMemoryScope returns the error every MemoryStore gives for a scope it
// does not keep or a user scope without a user id, so that stores outside
// this package refuse exactly what the in-memory one refuses. A global
// scope's subject is its tenant, empty or not.
func CheckMemoryScope(scope MemoryScope, subject string) error { return checkScope(scope, subject) }

// CheckMemoryEntry returns the error every MemoryStore's AddMemory gives for
// an entry it must refuse: a bad scope or subject (CheckMemoryScope) or an
// empty text.
func CheckMemoryEntry(scope MemoryScope, subject, text string) error {
	if err := checkScope(scope, subject); err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("memory entry is empty")
	}
	return nil
}

// checkScope refuses a scope a store does not keep, and a user entry without
// a user.
func checkScope(scope MemoryScope, subject string) error {
	switch scope {
	case MemoryUser:
		if subject == "" {
			return fmt.Errorf("user memory needs a user id")
		}
	case MemoryGlobal:
		// The subject is the tenant, "" for none.
	default:
		return fmt.Errorf("memory scope %q is not %q or %q", scope, MemoryUser, MemoryGlobal)
	}
	return nil
}

// AddMemory implements MemoryStore.
func (m *InMemoryMemory) AddMemory(ctx context.Context, scope MemoryScope, subject, text string) (MemoryEntry, error) {
	if err := ctx.Err(); err != nil {
		return MemoryEntry{}, err
	}
	if err := CheckMemoryEntry(scope, subject, text); err != nil {
		return MemoryEntry{}, err
	}
	e := MemoryEntry{Scope: scope, Subject: subject, Text: text, Created: time.Now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey{scope, subject}
	m.entries[k] = append(m.entries[k], e)
	return e, nil
}

// Memories implements MemoryStore.
func (m *InMemoryMemory) Memories(ctx context.Context, scope MemoryScope, subject string) ([]MemoryEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkScope(scope, subject); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entries[memKey{scope, subject}]), nil
}

// messageTokens is the token estimate of one message: the gateway's
// heuristic for a request holding only that message, less the reply
// priming, so that there is one heuristic.
func messageTokens(m gateway.Message) int64 {
	return gateway.EstimateInputTokens(gateway.Request{Messages: []gateway.Message{m}}) - emptyRequestTokens
}

var emptyRequestTokens = gateway.EstimateInputTokens(gateway.Request{})

// trimThread returns the suffix of a conversation that fits in budget
// tokens, dropping the oldest complete turns first. A turn starts at a user
// message and runs to the next one, so an assistant's tool calls are never
// separated from their results. The current turn, from msgs[turn] (the
// run's input) on, is always kept whole, even when it alone exceeds the
// budget: the model must see the question it answers, and the user
// messages the run adds itself (an output repair prompt) start no turn, so
// the answer under repair is never dropped either.
func trimThread(msgs []gateway.Message, budget, turn int) []gateway.Message {
	if budget <= 0 || len(msgs) == 0 {
		return msgs
	}
	var total int64
	for i := range msgs {
		total += messageTokens(msgs[i])
	}
	start := 0
	for total > int64(budget) {
		// The next turn boundary after start, at the current turn's start
		// at the latest.
		next := -1
		for i := start + 1; i <= turn && i < len(msgs); i++ {
			if msgs[i].Role == gateway.RoleUser {
				next = i
				break
			}
		}
		if next < 0 {
			break // only the newest turn is left
		}
		for i := start; i < next; i++ {
			total -= messageTokens(msgs[i])
		}
		start = next
	}
	return msgs[start:]
}

// renderMemory builds the one system message that carries stored memory,
// each scope kept to its newest entries within its token budget. It returns
// false when there is nothing to inject.
func renderMemory(user, global []MemoryEntry, userBudget, globalBudget int) (gateway.Message, bool) {
	var b strings.Builder
	section := func(title string, entries []MemoryEntry, budget int) {
		kept := fitNewest(entries, budget)
		if len(kept) == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(title)
		for _, e := range kept {
			b.WriteString("\n- ")
			b.WriteString(e.Text)
		}
	}
	section("Memory about this user:", user, userBudget)
	section("Shared memory:", global, globalBudget)
	if b.Len() == 0 {
		return gateway.Message{}, false
	}
	return gateway.Message{Role: gateway.RoleSystem, Content: b.String()}, true
}

// fitNewest returns the newest entries whose texts fit in budget tokens, in
// their original order.
func fitNewest(entries []MemoryEntry, budget int) []MemoryEntry {
	var used int64
	first := len(entries)
	for i := len(entries) - 1; i >= 0; i-- {
		t := gateway.EstimateTokens(entries[i].Text) + 1
		if used+t > int64(budget) {
			break
		}
		used += t
		first = i
	}
	return entries[first:]
}
