package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aidgen/aid/runtime/agents"
)

// Memory is an agents.MemoryStore in PostgreSQL: the user and global memory
// of one named store (Config.MemoryStores), kept beside the runs so that
// every replica reads what any of them wrote. It is safe for concurrent
// use.
type Memory struct {
	s    *Store
	name string
}

// Memory returns the memory store called name, the name agents' Memory
// settings refer to. Stores of different names share the table but never
// each other's entries.
func (s *Store) Memory(name string) (*Memory, error) {
	if name == "" {
		return nil, fmt.Errorf("pgstore: memory store name is empty")
	}
	if err := checkText("memory store name", name); err != nil {
		return nil, err
	}
	return &Memory{s: s, name: name}, nil
}

// AddMemory implements agents.MemoryStore.
func (m *Memory) AddMemory(ctx context.Context, scope agents.MemoryScope, subject, text string) (agents.MemoryEntry, error) {
	if err := agents.CheckMemoryEntry(scope, subject, text); err != nil {
		return agents.MemoryEntry{}, fmt.Errorf("pgstore: add memory: %w", err)
	}
	what := "user id"
	if scope == agents.MemoryGlobal {
		what = "tenant"
	}
	if err := checkText(what, subject); err != nil {
		return agents.MemoryEntry{}, err
	}
	e := agents.MemoryEntry{Scope: scope, Subject: subject, Text: text}
	err := m.s.doAs(ctx, "memory store", func(ctx context.Context) error {
		return m.s.db.QueryRow(ctx, `INSERT INTO `+m.s.memory+` (store, scope, subject, text) VALUES ($1, $2, $3, $4) RETURNING created_at`,
			m.name, string(scope), subject, []byte(text)).Scan(&e.Created)
	})
	if err != nil {
		return agents.MemoryEntry{}, fmt.Errorf("pgstore: add %s memory to store %s: %w", scope, m.name, err)
	}
	return e, nil
}

// Memories implements agents.MemoryStore. Entries come back in the order
// they were added (an identity column), not by timestamp, so that two
// entries added in the same microsecond keep their order.
func (m *Memory) Memories(ctx context.Context, scope agents.MemoryScope, subject string) ([]agents.MemoryEntry, error) {
	if err := agents.CheckMemoryScope(scope, subject); err != nil {
		return nil, fmt.Errorf("pgstore: read memory: %w", err)
	}
	if !storable(subject) {
		return nil, nil // AddMemory refuses such a subject: it has no entries
	}
	var out []agents.MemoryEntry
	err := m.s.doAs(ctx, "memory store", func(ctx context.Context) error {
		rows, err := m.s.db.Query(ctx, `SELECT text, created_at FROM `+m.s.memory+`
			WHERE store = $1 AND scope = $2 AND subject = $3 ORDER BY id`, m.name, string(scope), subject)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (agents.MemoryEntry, error) {
			e := agents.MemoryEntry{Scope: scope, Subject: subject}
			var text []byte
			err := row.Scan(&text, &e.Created)
			e.Text = string(text)
			return e, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: read %s memory of store %s: %w", scope, m.name, err)
	}
	return out, nil
}

var _ agents.MemoryStore = (*Memory)(nil)
