package fakeapi

import (
	"io"
	"net/http"
	"net/http/httptest"
)

// Server is the part of a fake provider server that is the same for every
// API: a real HTTP server on a local port (net/http/httptest) playing a
// script of turns and logging the requests it receives, each answered as
// its [Wire] says. It is safe for concurrent use.
//
// A fake embeds it through an unexported alias, so that its methods are
// the fake's own and no other name joins the fake's API.
type Server[T, R any] struct {
	srv    *httptest.Server
	script *script[T, R]
	wire   Wire[T, R]
}

// NewServer starts a server playing turns in order, in the wire format of
// wire; Close it when done.
func NewServer[T, R any](turns []T, wire Wire[T, R]) *Server[T, R] {
	s := &Server[T, R]{script: newScript[T, R](turns), wire: wire}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close shuts the server down, blocking until all outstanding requests
// have completed.
func (s *Server[T, R]) Close() { s.srv.Close() }

// URL returns the server root, e.g. "http://127.0.0.1:12345".
func (s *Server[T, R]) URL() string { return s.srv.URL }

// Enqueue appends turns to the end of the script.
func (s *Server[T, R]) Enqueue(turns ...T) { s.script.enqueue(turns...) }

// Remaining returns the number of scripted turns not yet consumed.
func (s *Server[T, R]) Remaining() int { return s.script.remaining() }

// Requests returns the requests received so far, in order, rejected ones
// too.
func (s *Server[T, R]) Requests() []R { return s.script.logged() }

// HTTPClient returns an HTTP client configured for s, whose idle
// connections s's Close closes. It is a function, not a method, so that
// it does not join the API of every fake embedding s.
func HTTPClient[T, R any](s *Server[T, R]) *http.Client { return s.srv.Client() }

// serve answers one request: decoded and checked by the wire format, then
// answered by the turn it consumes.
func (s *Server[T, R]) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	x := &Exchange[T, R]{W: w, R: r, Body: body, srv: s, entry: -1, turn: -1}
	defer x.close()
	req, refused := s.wire.Decode(x)
	if refused != nil {
		x.refuse(req, refused)
		return
	}
	t := x.play(&req)
	if f := s.wire.Fail(t, req); f != nil {
		x.refuse(req, f)
		return
	}
	s.wire.Reply(x, t, req)
}
