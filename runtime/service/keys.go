package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aidgen/aid/runtime/kind"
)

// Role is what an API key may do. A key has one or more.
type Role string

// The roles.
const (
	// RoleCaller runs agents (chat completions, runs, MCP, search) and
	// reads and cancels the runs it started.
	RoleCaller Role = "caller"
	// RoleApprover reads its tenant's runs and decides their pending
	// calls (POST /v1/runs/{id}/resume), edited arguments included.
	RoleApprover Role = "approver"
	// RoleOperator reads, cancels and continues any run of its tenant,
	// and reads /metrics.
	RoleOperator Role = "operator"
	// RoleAdmin manages keys, and may do what every other role may, in
	// every tenant. Auth.Tokens are admin keys.
	RoleAdmin Role = "admin"
)

// Roles lists the roles, for configuration checks.
var Roles = []Role{RoleCaller, RoleApprover, RoleOperator, RoleAdmin}

// roleSet is a set of roles as bits.
type roleSet uint8

func (r Role) bit() roleSet {
	if i := slices.Index(Roles, r); i >= 0 {
		return 1 << i
	}
	return 0
}

func rolesOf(rs ...Role) roleSet {
	var s roleSet
	for _, r := range rs {
		s |= r.bit()
	}
	return s
}

// String lists the set's roles, for messages.
func (s roleSet) String() string {
	var names []string
	for _, r := range Roles {
		if s&r.bit() != 0 {
			names = append(names, string(r))
		}
	}
	return strings.Join(names, " or ")
}

// Key is an API key the service accepts: a name that records and logs
// show, its roles, its tenant, and its secret (or the secret's SHA-256).
type Key struct {
	// Name names the key in records (who approved, who started a run),
	// logs and metrics; required, and unique.
	Name string
	// Roles are what the key may do; at least one.
	Roles []Role
	// Tenant is the tenant whose runs, threads and memory the key sees;
	// empty for a key of no tenant, which sees the runs of no tenant
	// (an admin key sees every tenant's).
	Tenant string
	// Secret is the bearer secret; or SecretSHA256, the lower-case hex
	// SHA-256 of it, so that a configuration need not hold the secret.
	// Exactly one is set. The service keeps only the hash.
	Secret       string
	SecretSHA256 string
}

// KeyStore holds keys created at run time (aidgen keys create), shared by
// every replica: the service looks a secret it does not know up in it,
// and keeps the answer for Auth.KeyCacheTTL, the bound within which a
// revocation reaches every replica.
type KeyStore interface {
	// LookupKey returns the live (not revoked) key whose secret has the
	// SHA-256 sum, with ok false when there is none. The returned key's
	// secret fields are empty.
	LookupKey(ctx context.Context, sum [sha256.Size]byte) (key Key, ok bool, err error)
}

// DefaultKeyCacheTTL is how long a replica trusts what the KeyStore said
// of a secret: a key revoked in the store is refused by every replica at
// most this long after.
const DefaultKeyCacheTTL = 5 * time.Second

// principal is an authenticated key.
type principal struct {
	name   string
	roles  roleSet
	tenant string
}

func (p *principal) admin() bool { return p.roles&RoleAdmin.bit() != 0 }

// tenantName is the key's tenant; "" without authentication.
func (p *principal) tenantName() string {
	if p == nil {
		return ""
	}
	return p.tenant
}

// caller is the identity the layers below the service see.
func (p *principal) caller() kind.Caller { return kind.Caller{Key: p.name, Tenant: p.tenant} }

// keyring is the declared keys, by hash, and the runtime keys' cache.
type keyring struct {
	sums  [][sha256.Size]byte
	keys  []principal
	store KeyStore
	ttl   time.Duration

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cachedKey
}

type cachedKey struct {
	p       *principal // nil: no such key
	expires time.Time
}

// maxCachedKeys bounds the cache of runtime keys; past it the cache
// starts again empty, which costs a lookup per key, not correctness.
const maxCachedKeys = 10_000

// newKeyring checks the keys of auth and builds the ring; bearer tokens
// are admin keys named "admin".
func newKeyring(auth Auth) (*keyring, []error) {
	var errs []error
	kr := &keyring{store: auth.KeyStore, ttl: auth.KeyCacheTTL, cache: map[[sha256.Size]byte]cachedKey{}}
	if kr.ttl <= 0 {
		kr.ttl = DefaultKeyCacheTTL
	}
	for i, t := range auth.Tokens {
		if t == "" {
			errs = append(errs, &ConfigError{Field: "Auth.Tokens", Problem: fmt.Sprintf("token %d is empty", i)})
			continue
		}
		kr.add(sha256.Sum256([]byte(t)), principal{name: "admin", roles: RoleAdmin.bit()})
	}
	seen := map[string]bool{}
	for i, k := range auth.Keys {
		field := fmt.Sprintf("Auth.Keys[%d]", i)
		if seen[k.Name] {
			errs = append(errs, &ConfigError{Field: field, Problem: fmt.Sprintf("key %q is declared twice", k.Name)})
			continue
		}
		seen[k.Name] = true
		p, sum, problems := keyOf(k)
		for _, pr := range problems {
			errs = append(errs, &ConfigError{Field: field, Problem: pr})
		}
		if len(problems) == 0 {
			kr.add(sum, p)
		}
	}
	return kr, errs
}

// CheckKey refuses a key the service would refuse (see Key): no name, no
// role or an unknown one, not exactly one of a secret and its hash, a hash
// that is not one. A KeyStore checks a key with it before it creates one.
func CheckKey(k Key) error {
	_, _, problems := keyOf(k)
	if len(problems) == 0 {
		return nil
	}
	return &ConfigError{Field: "key " + strconv.Quote(k.Name), Problem: strings.Join(problems, "; ")}
}

// keyOf checks a key and returns it as the service keeps it.
func keyOf(k Key) (principal, [sha256.Size]byte, []string) {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	p := principal{name: k.Name, tenant: k.Tenant}
	var sum [sha256.Size]byte
	if k.Name == "" {
		fail("the key needs a name")
	}
	for _, r := range k.Roles {
		if r.bit() == 0 {
			fail("key %q: unknown role %q: want one of %v", k.Name, r, Roles)
		}
		p.roles |= r.bit()
	}
	if len(k.Roles) == 0 {
		fail("key %q has no role", k.Name)
	}
	switch {
	case (k.Secret == "") == (k.SecretSHA256 == ""):
		fail("key %q needs exactly one of a secret and its SHA-256", k.Name)
	case k.Secret != "":
		sum = sha256.Sum256([]byte(k.Secret))
	default:
		b, err := hex.DecodeString(k.SecretSHA256)
		if err != nil || len(b) != sha256.Size {
			fail("key %q: the SHA-256 of its secret must be %d hex digits", k.Name, 2*sha256.Size)
		}
		copy(sum[:], b)
	}
	return p, sum, problems
}

func (kr *keyring) add(sum [sha256.Size]byte, p principal) {
	kr.sums = append(kr.sums, sum)
	kr.keys = append(kr.keys, p)
}

// find returns the key whose secret is token, nil when there is none. The
// declared keys are compared by hash in constant time, all of them, so
// that the time taken says nothing of which matched.
func (kr *keyring) find(ctx context.Context, token string) (*principal, error) {
	sum := sha256.Sum256([]byte(token))
	at := -1
	for i := range kr.sums {
		if subtle.ConstantTimeCompare(sum[:], kr.sums[i][:]) == 1 {
			at = i
		}
	}
	if at >= 0 {
		return &kr.keys[at], nil
	}
	if kr.store == nil {
		return nil, nil
	}
	now := time.Now()
	kr.mu.Lock()
	c, ok := kr.cache[sum]
	kr.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.p, nil
	}
	k, found, err := kr.store.LookupKey(ctx, sum)
	if err != nil {
		return nil, fmt.Errorf("look up an API key: %w", err)
	}
	c = cachedKey{expires: now.Add(kr.ttl)}
	if found {
		c.p = &principal{name: k.Name, tenant: k.Tenant, roles: rolesOf(k.Roles...)}
	}
	kr.mu.Lock()
	if len(kr.cache) >= maxCachedKeys {
		clear(kr.cache)
	}
	kr.cache[sum] = c
	kr.mu.Unlock()
	return c.p, nil
}

// principalOf returns the key that authenticated r; nil when the service
// authenticates nobody (auth kind none), which may do everything. It is
// kept in the request's reqInfo, which the context carries already.
func principalOf(r *http.Request) *principal {
	return info(r).key
}

// mayDecide reports whether the request's key may decide pending calls.
func mayDecide(r *http.Request) bool {
	p := principalOf(r)
	return p == nil || p.roles&(RoleApprover.bit()|RoleAdmin.bit()) != 0
}

// checkBearer refuses a request without a key that has one of roles,
// answering 401 (no key, or one not accepted) or 403 (a key without the
// role); otherwise it returns the request with the key and the caller on
// its context. The secret is never logged or echoed.
func (s *Service) checkBearer(w http.ResponseWriter, r *http.Request, roles roleSet) (*http.Request, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		info(r).err = writeError(w, newError(http.StatusUnauthorized, TypeAuthentication, CodeMissingAPIKey,
			"missing bearer token: send Authorization: Bearer <token>"), nil)
		return r, false
	}
	p, err := s.keys.find(r.Context(), token)
	if err != nil {
		info(r).err = writeError(w, err, nil)
		return r, false
	}
	if p == nil {
		info(r).err = writeError(w, newError(http.StatusUnauthorized, TypeAuthentication, CodeInvalidAPIKey,
			"invalid bearer token"), nil)
		return r, false
	}
	if !p.admin() && p.roles&roles == 0 {
		info(r).keyName = p.name
		info(r).err = writeError(w, newError(http.StatusForbidden, TypePermission, CodeInsufficientRole,
			fmt.Sprintf("key %q may not do this: it needs the role %s", p.name, roles)), nil)
		return r, false
	}
	ri := info(r)
	ri.key, ri.keyName = p, p.name
	return r.WithContext(kind.WithCaller(r.Context(), p.caller())), true
}
