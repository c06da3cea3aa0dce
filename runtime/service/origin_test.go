package service_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/service"
)

// serveOn serves e's service (rebuilt with mut) on a loopback listener
// through Serve, so that it knows it listens on loopback, and returns its
// address.
func serveOn(t *testing.T, mut func(*service.Config)) string {
	t.Helper()
	e := newEnv(t, options{svc: mut})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.svc.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

// TestHostRebindingRefused: a service listening on loopback answers a
// Host that is a loopback name or an allowed one, and refuses any other
// (a DNS-rebinding page) with 403 on every route, /healthz and unknown
// paths included.
func TestHostRebindingRefused(t *testing.T) {
	addr := serveOn(t, func(c *service.Config) { c.AllowedHosts = []string{"desk.internal"} })
	_, port, _ := net.SplitHostPort(addr)
	client := &http.Client{}
	do := func(host, method, path string) int {
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp.StatusCode
	}
	for _, path := range []string{"GET /healthz", "GET /v1/models", "POST /v1/chat/completions", "GET /metrics", "POST /mcp", "GET /nowhere"} {
		method, p, _ := strings.Cut(path, " ")
		for _, host := range []string{"evil.example:" + port, "attacker.test", "127.0.0.1.nip.example:" + port} {
			req, _ := http.NewRequest(method, "http://"+addr+p, strings.NewReader(`{}`))
			req.Host = host
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if code, typ, _ := servicetest.ErrorOnly(t, body); resp.StatusCode != http.StatusForbidden || code != service.CodeHostNotAllowed || typ != service.TypePermission ||
				!strings.Contains(string(body), "loopback") {
				t.Errorf("%s with Host %s: %d %s", path, host, resp.StatusCode, body)
			}
		}
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "desk.internal", "DESK.internal:" + port} {
			if status := do(host, method, p); status == http.StatusForbidden {
				t.Errorf("%s with Host %s refused", path, host)
			}
		}
	}
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMCPOriginRefused: /mcp refuses a browser page of an origin it does
// not allow, with 403, before authentication; a loopback page, an allowed
// origin and a request without Origin pass.
func TestMCPOriginRefused(t *testing.T) {
	addr := serveOn(t, func(c *service.Config) { c.AllowedOrigins = []string{"https://desk.example.com"} })
	_, port, _ := net.SplitHostPort(addr)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(origin string) (int, []byte) {
		hdr := []string{"Accept", "application/json, text/event-stream"}
		if origin != "" {
			hdr = append(hdr, "Origin", origin)
		}
		status, _, body := servicetest.Do(t, http.DefaultClient, "POST", "http://"+addr+"/mcp", token, strings.NewReader(initialize), hdr...)
		return status, body
	}
	for _, origin := range []string{"https://evil.example", "null", "http://desk.example.com", "https://desk.example.com.evil.example"} {
		status, body := post(origin)
		if code, typ, _ := servicetest.ErrorOnly(t, body); status != http.StatusForbidden || code != service.CodeOriginNotAllowed || typ != service.TypePermission {
			t.Errorf("Origin %s: %d %s", origin, status, body)
		}
	}
	for _, origin := range []string{"", "https://desk.example.com", "http://localhost:" + port, "http://127.0.0.1:5173"} {
		if status, body := post(origin); status != http.StatusOK {
			t.Errorf("Origin %q: %d %s", origin, status, body)
		}
	}
}
