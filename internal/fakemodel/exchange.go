package fakemodel

import (
	"encoding/json"
	"net/http"
)

// exchange is one request to a fake server and its answer. The fake's
// [wireFormat] reads the request from it and replies through it.
type exchange[R Request] struct {
	// W is the response writer.
	W http.ResponseWriter
	// R is the request; its body is read, into Body.
	R *http.Request
	// Body is the request body.
	Body []byte

	srv   *server[R]
	entry int // the request's index in the log, -1 before it is logged
	turn  int // the index of the scripted turn consumed, -1 for none
	gz    *gzipWriter
}

// NewID returns a fresh id such as "toolu_0001", counted per prefix
// across the server's requests.
func (x *exchange[R]) NewID(prefix string) string { return x.srv.script.newID(prefix) }

// Log puts req in the server's request log as this exchange's entry: the
// first call appends it, later ones replace it.
func (x *exchange[R]) Log(req R) { x.entry = x.srv.script.log(x.entry, req) }

// Reply logs req as answered with 200 and answers it: with v as JSON or,
// when stream, with the server-sent events that events writes; with gzip
// the body goes out gzip-compressed. Headers set on W before stay.
func (x *exchange[R]) Reply(req *R, gzip, stream bool, v any, events func(*eventStream)) {
	x.mark(req, http.StatusOK)
	if gzip {
		x.gz = newGzipWriter(x.W)
		x.W = x.gz
	}
	if stream {
		events(startSSE(x.W, x.R))
		return
	}
	writeJSON(x.W, http.StatusOK, v, nil)
}

// play consumes the turn that answers req, and logs req as having
// consumed it: the next scripted turn, or what its Respond function makes
// of req, or the wire format's exhausted turn once the script is
// exhausted or Respond returns nil.
func (x *exchange[R]) play(req *R) Turn {
	t, n, ok := x.srv.script.take()
	x.turn = n
	x.mark(req, 0)
	if !ok {
		return Turn{Text: ExhaustedText}
	}
	if t.Respond != nil {
		p := t.Respond(*req)
		if p == nil {
			return Turn{Text: ExhaustedText}
		}
		t = *p
	}
	return t
}

// refuse logs req as answered with f's status and answers it with f.
func (x *exchange[R]) refuse(req R, f *refusal) {
	x.mark(&req, f.Status)
	writeJSON(x.W, f.Status, f.Body, f.Header)
}

// mark logs req as answered with status, having consumed the exchange's
// turn.
func (x *exchange[R]) mark(req *R, status int) {
	x.srv.wire.Mark(req, status, x.turn)
	x.Log(*req)
}

// close ends a gzip-compressed body.
func (x *exchange[R]) close() {
	if x.gz != nil {
		_ = x.gz.Close()
	}
}

// writeJSON answers status with v as JSON, the header's values set over
// the reply's headers (Content-Type too) first.
func writeJSON(w http.ResponseWriter, status int, v any, header http.Header) {
	w.Header().Set("Content-Type", "application/json")
	setHeaders(w.Header(), header)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
