package agents

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RunLister is a Store that lists its runs, newest first, a page at a
// time: what GET /v1/runs serves. The in-memory and PostgreSQL stores are
// ones; a Store that is not cannot be listed.
type RunLister interface {
	// ListRuns returns the runs f selects, the most recently created
	// first, and the cursor of the next page ("" after the last). A
	// cursor that is not one this store made is an *InvalidOptionError.
	ListRuns(ctx context.Context, f RunFilter) (RunPage, error)
}

// ListingUnsupportedError reports a listing asked of a Store that is not a
// RunLister: the runs of such a store are read by id only. Of the stores
// in this module, only aidgen run's run files (one file per run, which no
// service keeps its runs in) are one.
type ListingUnsupportedError struct {
	// Store is the store's Go type, to say which.
	Store string
}

func (e *ListingUnsupportedError) Error() string {
	return fmt.Sprintf("the run store (%s) cannot list runs (agents.RunLister): read a run by its id", e.Store)
}

// ListRuns lists the runs of store that f selects (RunLister.ListRuns),
// or returns a *ListingUnsupportedError when store cannot list them.
func ListRuns(ctx context.Context, store Store, f RunFilter) (RunPage, error) {
	l, ok := store.(RunLister)
	if !ok {
		return RunPage{}, &ListingUnsupportedError{Store: fmt.Sprintf("%T", store)}
	}
	return l.ListRuns(ctx, f)
}

// RunFilter selects runs for ListRuns.
type RunFilter struct {
	// Tenant keeps the runs of one tenant (Checkpoint.Tenant; "" is the
	// runs of no tenant), unless AllTenants.
	Tenant     string
	AllTenants bool
	// Key, when set, keeps the runs that key started (Checkpoint.Key).
	Key string
	// Statuses, when set, keeps the runs in one of them.
	Statuses []Status
	// Limit bounds the page, 1 to MaxListRuns; zero means DefaultListRuns.
	Limit int
	// After is the previous page's RunPage.Next; empty for the first page.
	After string
}

// RunPage is a page of runs.
type RunPage struct {
	// Runs are the page's runs, newest first.
	Runs []RunRecord
	// Next is the cursor of the next page; empty when this is the last.
	Next string
}

// The bounds of RunFilter.Limit.
const (
	DefaultListRuns = 20
	MaxListRuns     = 100
)

// Check refuses a filter that no store can serve, and returns it with its
// defaults and its cursor decoded.
func (f RunFilter) Check() (RunFilter, RunCursor, error) {
	switch {
	case f.Limit == 0:
		f.Limit = DefaultListRuns
	case f.Limit < 0 || f.Limit > MaxListRuns:
		return f, RunCursor{}, &InvalidOptionError{Option: "limit", Problem: fmt.Sprintf("%d is not from 1 to %d", f.Limit, MaxListRuns)}
	}
	var c RunCursor
	if f.After != "" {
		var err error
		if c, err = ParseRunCursor(f.After); err != nil {
			return f, RunCursor{}, err
		}
	}
	return f, c, nil
}

// Match reports whether a run of that owner and status is one f selects.
func (f RunFilter) Match(key, tenant string, status Status) bool {
	return (f.AllTenants || tenant == f.Tenant) && (f.Key == "" || key == f.Key) &&
		(len(f.Statuses) == 0 || slices.Contains(f.Statuses, status))
}

// RunCursor is a place in a listing: after the run created at Created
// with the id RunID, in the order newest first, then the greatest id.
type RunCursor struct {
	Created time.Time
	RunID   string
}

// Zero reports whether c is no place: the start of the listing.
func (c RunCursor) Zero() bool { return c.RunID == "" }

// Before reports whether a run created at created with id comes after the
// cursor in a listing (older, or as old with a smaller id).
func (c RunCursor) Before(created time.Time, id string) bool {
	if c.Zero() {
		return true
	}
	return created.Before(c.Created) || (created.Equal(c.Created) && id < c.RunID)
}

// String encodes the cursor, opaque to clients.
func (c RunCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Created.UnixMicro(), 10) + "." + c.RunID))
}

// ParseRunCursor decodes a RunCursor's String.
func ParseRunCursor(s string) (RunCursor, error) {
	bad := &InvalidOptionError{Option: "after", Problem: "not a cursor of this listing: pass the next cursor of the previous page as it is"}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return RunCursor{}, bad
	}
	us, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || !validRunID(id) {
		return RunCursor{}, bad
	}
	return RunCursor{Created: time.UnixMicro(n).UTC(), RunID: id}, nil
}

// ListRuns implements RunLister. It reads every run the store holds: a
// store bounded by its Retention holds few enough.
func (s *InMemoryStore) ListRuns(ctx context.Context, f RunFilter) (RunPage, error) {
	f, after, err := f.Check()
	if err != nil {
		return RunPage{}, err
	}
	if err := ctx.Err(); err != nil {
		return RunPage{}, err
	}
	s.mu.Lock()
	now := s.now()
	var hits []*memRun
	for _, r := range s.runs {
		if !s.expired(r, now) && f.Match(r.key, r.tenant, r.rec.Status) && after.Before(r.created, r.rec.RunID) {
			hits = append(hits, r)
		}
	}
	slices.SortFunc(hits, func(a, b *memRun) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return strings.Compare(b.rec.RunID, a.rec.RunID)
	})
	var page RunPage
	if len(hits) > f.Limit {
		hits = hits[:f.Limit]
		last := hits[len(hits)-1]
		page.Next = RunCursor{Created: last.created, RunID: last.rec.RunID}.String()
	}
	for _, r := range hits {
		rec, err := r.record()
		if err != nil {
			s.mu.Unlock()
			return RunPage{}, err
		}
		page.Runs = append(page.Runs, rec)
	}
	s.mu.Unlock()
	return page, nil
}
