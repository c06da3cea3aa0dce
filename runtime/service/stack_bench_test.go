package service_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway/fake"
)

// BenchmarkLiveRequestStack reports what a chat completion through the
// agent holds in goroutine stacks (stack-B/req, and gc-stack-B/req after a
// collection) and goroutines (goroutines/req) while it waits on its model:
// 1,000 requests are sent, each on a connection of its own, from one
// goroutine that never reads an answer, and the service's stacks are read
// while all of them wait. With the fake provider the model answers after
// an hour; with the openai-compatible one the upstream is a listener that
// accepts connections and never reads or answers, so that the figure holds
// the service's own goroutines only: the server's connection, its
// background read, and the upstream connection's read and write loops.
func BenchmarkLiveRequestStack(b *testing.B) {
	const requests = 1000
	for _, upstream := range []string{"fake", "openai-compatible"} {
		b.Run(upstream, func(b *testing.B) {
			var perReq, afterGC, goroutines float64
			for b.Loop() {
				perReq, afterGC, goroutines = liveRequests(b, upstream, requests)
			}
			b.ReportMetric(perReq, "stack-B/req")
			b.ReportMetric(afterGC, "gc-stack-B/req")
			b.ReportMetric(goroutines, "goroutines/req")
		})
	}
}

// liveRequests sends n requests that wait on their model to a new service
// on upstream, and returns the stack and goroutines each holds.
func liveRequests(b *testing.B, upstream string, n int) (perReq, afterGC, goroutines float64) {
	b.Helper()
	var waiting func() int
	var svc http.Handler
	switch upstream {
	case "fake":
		p, err := fake.New(fake.Config{Script: []fake.Step{{Text: "Paris"}}, Loop: true, Latency: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		waiting, svc = p.Calls, newBenchServiceWith(b, p)
	default:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		var accepted []net.Conn
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				accepted = append(accepted, c)
				mu.Unlock()
			}
		}()
		defer func() {
			ln.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range accepted {
				c.Close()
			}
		}()
		waiting = func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(accepted)
		}
		transport := &http.Transport{}
		defer transport.CloseIdleConnections()
		svc = newBenchService(b, &http.Client{Transport: transport}, "http://"+ln.Addr().String())
	}
	front := httptest.NewServer(svc)
	defer front.Close()
	request := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", token, len(benchBody), benchBody)

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before, beforeG := ms.StackInuse, runtime.NumGoroutine()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	target := waiting() + n
	for range n {
		c, err := net.Dial("tcp", front.Listener.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte(request)); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for waiting() < target {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d requests reached the upstream", waiting()-target+n, n)
		}
		time.Sleep(time.Millisecond)
	}
	// The last connections' request is written and their goroutines park.
	time.Sleep(100 * time.Millisecond)
	runtime.ReadMemStats(&ms)
	perReq = float64(ms.StackInuse-before) / float64(n)
	goroutines = float64(runtime.NumGoroutine()-beforeG) / float64(n)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	afterGC = float64(ms.StackInuse-before) / float64(n)
	return perReq, afterGC, goroutines
}
