package fakemodel

import (
	"io"
	"net/http"
	"net/http/httptest"
)

// server is the part of a fake provider server that is the same for every
// API: a real HTTP server on a local port (net/http/httptest) playing a
// script of turns and logging the requests it receives, each answered as
// its [wireFormat] says. It is safe for concurrent use.
//
// A fake embeds it through an unexported alias, so that its methods are
// the fake's own and no other name joins the fake's API.
type server[R Request] struct {
	srv    *httptest.Server
	script *script[R]
	wire   wireFormat[R]
}

// newServer starts a server playing turns in order, in the wire format of
// wire; Close it when done.
func newServer[R Request](turns []Turn, wire wireFormat[R]) *server[R] {
	s := &server[R]{script: newScript[R](turns), wire: wire}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close shuts the server down, blocking until all outstanding requests
// have completed.
func (s *server[R]) Close() { s.srv.Close() }

// URL returns the server root, e.g. "http://127.0.0.1:12345".
func (s *server[R]) URL() string { return s.srv.URL }

// Enqueue appends turns to the end of the script.
func (s *server[R]) Enqueue(turns ...Turn) { s.script.enqueue(turns...) }

// Remaining returns the number of scripted turns not yet consumed.
func (s *server[R]) Remaining() int { return s.script.remaining() }

// Requests returns the requests received so far, in order, rejected ones
// too.
func (s *server[R]) Requests() []R { return s.script.logged() }

// httpClient returns an HTTP client configured for s, whose idle
// connections s's Close closes. It is a function, not a method, so that
// it does not join the API of every fake embedding s.
func httpClient[R Request](s *server[R]) *http.Client { return s.srv.Client() }

// serve answers one request: decoded and checked by the wire format, then
// answered by the turn it consumes.
func (s *server[R]) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	x := &exchange[R]{W: w, R: r, Body: body, srv: s, entry: -1, turn: -1}
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
