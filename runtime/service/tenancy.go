package service

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aidgen/aid/runtime/agents"
)

// reaches reports whether the key may act on a run: its tenant's run with
// one of the tenant-wide roles, or, when own allows it, a run the key
// started itself as a caller. nil (a service without authentication) and
// an admin key reach every run.
func (p *principal) reaches(rec agents.RunRecord, tenantWide roleSet, own bool) bool {
	if p == nil || p.admin() {
		return true
	}
	cp := &rec.Checkpoint
	switch {
	case cp.Tenant != p.tenant:
		return false
	case p.roles&tenantWide != 0:
		return true
	default:
		return own && p.roles&RoleCaller.bit() != 0 && cp.Key == p.name
	}
}

// What a key does with a run it reaches: read it (its own, or its
// tenant's as an approver or operator), cancel it (its own, or its
// tenant's as an operator), decide it (its tenant's, as an approver),
// continue it (its tenant's, as an operator).
var (
	readRun     = runAccess{rolesOf(RoleApprover, RoleOperator), true}
	cancelRun   = runAccess{rolesOf(RoleOperator), true}
	decideRun   = runAccess{rolesOf(RoleApprover), false}
	continueRun = runAccess{rolesOf(RoleOperator), false}
)

type runAccess struct {
	tenantWide roleSet
	own        bool
}

// loadRun loads a run the request's key reaches for what it does: a run
// it does not reach, another tenant's above all, does not exist for it
// (*agents.RunNotFoundError, 404), so that an answer never tells one
// tenant what another's ids are.
func (s *Service) loadRun(r *http.Request, id string, a runAccess) (agents.RunRecord, error) {
	rec, err := s.cfg.Agents.Store().LoadRun(r.Context(), id)
	if err != nil {
		return agents.RunRecord{}, err
	}
	if !principalOf(r).reaches(rec, a.tenantWide, a.own) {
		return agents.RunRecord{}, &agents.RunNotFoundError{RunID: id}
	}
	return rec, nil
}

// scopeIDs makes a run's thread and user ids the key's own: a tenant
// key's user id is qualified by its tenant (user memory is the tenant's)
// and its thread id by its tenant and name (a caller's threads, their
// grants and thread budgets are its own), so that two tenants, or two
// callers, naming the same thread or user never share it. A service
// without authentication, and an admin key, use the ids as given.
func (p *principal) scopeIDs(threadID, userID string) (string, string) {
	if p == nil || p.admin() {
		return threadID, userID
	}
	if threadID != "" {
		threadID = p.tenant + "/" + p.name + "/" + threadID
	}
	if userID != "" {
		userID = p.tenant + "/" + userID
	}
	return threadID, userID
}

// byKey is who continues or cancels a run, for its record: the key that
// asked, or, without authentication, the name the body gives, which is
// checked either way.
func byKey(r *http.Request, claimed string) (string, error) {
	if err := agents.CheckBy(claimed); err != nil {
		return "", err
	}
	if p := principalOf(r); p != nil {
		return p.name, nil
	}
	return claimed, nil
}

// runListJSON is the answer of GET /v1/runs.
type runListJSON struct {
	Object  string          `json:"object"`
	Data    []runRecordJSON `json:"data"`
	HasMore bool            `json:"has_more"`
	// Next is the cursor of the next page, for ?after=.
	Next string `json:"next,omitempty"`
}

// listRuns answers GET /v1/runs?status=&limit=&after=: the runs the key
// may read, newest first, a page at a time. status is a comma-separated
// list of statuses.
func (s *Service) listRuns(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := agents.RunFilter{After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return invalid(CodeInvalidRequest, "limit", fmt.Sprintf("limit must be a number from 1 to %d", agents.MaxListRuns))
		}
		f.Limit = n
	}
	if v := q.Get("status"); v != "" {
		for st := range strings.SplitSeq(v, ",") {
			if !knownStatus(agents.Status(st)) {
				return invalid(CodeInvalidRequest, "status", fmt.Sprintf("status %.40q is not one of %s", st, strings.Join(statusNames(), ", ")))
			}
			f.Statuses = append(f.Statuses, agents.Status(st))
		}
	}
	switch p := principalOf(r); {
	case p == nil || p.admin():
		f.AllTenants = true
	default:
		f.Tenant = p.tenant
		if p.roles&readRun.tenantWide == 0 {
			f.Key = p.name // a caller lists the runs it started
		}
	}
	page, err := agents.ListRuns(r.Context(), s.cfg.Agents.Store(), f)
	if err != nil {
		return err
	}
	out := runListJSON{Object: "list", Data: make([]runRecordJSON, len(page.Runs)), HasMore: page.Next != "", Next: page.Next}
	for i, rec := range page.Runs {
		out.Data[i] = recordOf(rec, mayDecide(r))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// runStatuses are the statuses a run can have, for ?status=.
var runStatuses = []agents.Status{
	agents.StatusQueued, agents.StatusRunning, agents.StatusPaused, agents.StatusCompleted, agents.StatusMaxSteps,
	agents.StatusBudgetExceeded, agents.StatusFailed, agents.StatusTimedOut, agents.StatusCancelled,
}

func knownStatus(st agents.Status) bool {
	for _, s := range runStatuses {
		if s == st {
			return true
		}
	}
	return false
}

func statusNames() []string {
	out := make([]string, len(runStatuses))
	for i, s := range runStatuses {
		out[i] = string(s)
	}
	return out
}
