package kind

import "context"

// Caller is whom a call is made for: the API key that authenticated the
// request that started it and the tenant that key belongs to. The service
// puts it on the request's context once it has checked the key; the layers
// below it (the gateway's budgets and rate limits, the agents' run store)
// read it from there, so identity comes from the key and never from a
// request body. It lives here because every layer reads it and none of
// them may import the layer that sets it.
type Caller struct {
	// Key is the name of the API key, as declared or created; "" for a
	// call that no key started (a CLI run, a test).
	Key string
	// Tenant is the key's tenant; "" where the app declares no tenants.
	Tenant string
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries and whether it carries one.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
