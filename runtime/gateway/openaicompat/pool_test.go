package openaicompat_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// TestDefaultClientKeepsConnections: a provider given no HTTP client keeps
// a connection per concurrent call for the next calls. net/http's default
// transport keeps two idle connections per host, so rounds of concurrent
// calls to one provider closed the rest after each call and dialled anew
// (over TLS, a handshake per call): 11% of a service's CPU at 1,000
// requests per second on loopback.
func TestDefaultClientKeepsConnections(t *testing.T) {
	const calls, rounds = 16, 4
	var dials atomic.Int64
	// The server holds each call until all the calls of its round are in,
	// so that every round needs calls connections at once.
	var mu sync.Mutex
	arrived, gate := 0, make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		g := gate
		if arrived++; arrived%calls == 0 {
			close(gate)
			gate = make(chan struct{})
		}
		mu.Unlock()
		select {
		case <-g:
		case <-time.After(5 * time.Second): // fail on the count, not by hanging
		}
		writeJSON(w, 200, completion(small, textMessage("ok"), "stop", 3, 1))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p, err := openaicompat.New(openaicompat.Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	spec := gateway.ModelSpec{ID: small, Provider: "openai", MaxOutputTokens: 16}
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "hi"}}, MaxOutputTokens: 16}
	for round := range rounds {
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				if _, err := p.Generate(context.Background(), spec, req); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Wait()
	}
	if got := dials.Load(); got > calls {
		t.Errorf("%d rounds of %d concurrent calls opened %d connections; want at most %d, one per concurrent call", rounds, calls, got, calls)
	}
}
