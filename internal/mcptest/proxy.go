// Package mcptest holds what the tests of a fleet of MCP servers share: a
// round-robin load balancer that can lose a response or deliver a request
// twice (Balancer), and a client that speaks protocol 2026-07-28 as the
// specification writes its messages (Wire), for what go-sdk's client
// cannot send or read.
package mcptest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
)

// Hop is one POSTed JSON-RPC message through the Balancer, and the
// replica it went to.
type Hop struct {
	Replica int
	Method  string
	// Tool is a tools/call's tool; Answered is set when the call carries
	// a request state (the answer of a multi round-trip request); Task is
	// a tasks/* request's task id.
	Tool     string
	Answered bool
	Task     string
	// Lost is set when the Balancer lost the response; Twice when it
	// delivered the message to the other replica too (a second Hop).
	Lost, Twice bool
}

// Balancer is a round-robin load balancer over replicas: each POST goes
// to the next one, whatever it carries, or with Affinity to the replica
// that created the request's session (Mcp-Session-Id); GET and DELETE go
// where their session is. It records every POST (Hops).
type Balancer struct {
	backends []*httputil.ReverseProxy
	mu       sync.Mutex
	next     int
	sessions map[string]int
	hops     []Hop
	// Affinity routes requests with a Mcp-Session-Id to the replica that
	// created the session, as a load balancer configured for 2025-11-25
	// sessions does.
	Affinity bool
	// Lose picks the POSTs whose response is lost: the replica handles
	// it, the client gets 502. Twice picks those delivered to the next
	// replica after the first one, the client getting the second answer.
	// Route, when it returns 0 or more, picks the replica of a POST. Each
	// may be nil; set them before requests flow, or under the lock of
	// Set.
	Lose, Twice func(h Hop) bool
	Route       func(h Hop) int
}

// NewBalancer returns a balancer over the replicas at urls.
func NewBalancer(urls ...string) *Balancer {
	b := &Balancer{sessions: map[string]int{}}
	for _, u := range urls {
		target, err := url.Parse(u)
		if err != nil {
			panic(err)
		}
		b.backends = append(b.backends, &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
			FlushInterval: -1,
		})
	}
	return b
}

// Set runs f with the balancer locked, to change Lose, Twice or Route
// while requests flow.
func (b *Balancer) Set(f func(b *Balancer)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

// ServeHTTP implements http.Handler.
func (b *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h := readHop(body)
	b.mu.Lock()
	i := b.next
	sid := r.Header.Get("Mcp-Session-Id")
	switch {
	case sid != "" && (b.Affinity || r.Method != http.MethodPost):
		i = b.sessions[sid]
	case r.Method == http.MethodPost:
		b.next = (b.next + 1) % len(b.backends)
		if b.Route != nil {
			if to := b.Route(h); to >= 0 {
				i = to
			}
		}
	}
	h.Replica = i
	h.Lost = r.Method == http.MethodPost && b.Lose != nil && b.Lose(h)
	h.Twice = r.Method == http.MethodPost && !h.Lost && b.Twice != nil && b.Twice(h)
	if r.Method == http.MethodPost {
		b.hops = append(b.hops, h)
	}
	b.mu.Unlock()
	forward := func(i int, w http.ResponseWriter) {
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		b.backends[i].ServeHTTP(w, r2)
	}
	switch {
	case h.Lost:
		forward(i, httptest.NewRecorder())
		http.Error(w, "bad gateway: the replica's response was lost", http.StatusBadGateway)
	case h.Twice:
		forward(i, httptest.NewRecorder())
		second := h
		second.Replica = (i + 1) % len(b.backends)
		b.mu.Lock()
		b.hops = append(b.hops, second)
		b.mu.Unlock()
		forward(second.Replica, w)
	default:
		forward(i, flusher{w})
		if sid := w.Header().Get("Mcp-Session-Id"); sid != "" {
			b.mu.Lock()
			b.sessions[sid] = i
			b.mu.Unlock()
		}
	}
}

// flusher passes a response through, flushing as it goes.
type flusher struct{ http.ResponseWriter }

func (f flusher) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// readHop reads what a POSTed JSON-RPC message is.
func readHop(body []byte) Hop {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name         string `json:"name"`
			RequestState string `json:"requestState"`
			TaskID       string `json:"taskId"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	return Hop{Method: m.Method, Tool: m.Params.Name, Answered: m.Params.RequestState != "", Task: m.Params.TaskID}
}

// Hops returns the POSTs so far whose method is method ("" for all).
func (b *Balancer) Hops(method string) []Hop {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Hop
	for _, h := range b.hops {
		if method == "" || h.Method == method {
			out = append(out, h)
		}
	}
	return out
}

// Calls returns the tools/call POSTs of tool so far.
func (b *Balancer) Calls(tool string) []Hop {
	var out []Hop
	for _, h := range b.Hops("tools/call") {
		if h.Tool == tool {
			out = append(out, h)
		}
	}
	return out
}
