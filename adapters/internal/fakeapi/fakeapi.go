// Package fakeapi holds what the fake provider servers (openaitest,
// chattest, anthropictest) share: a script of turns consumed in order, a log of the
// requests received, and the writing of JSON replies and server-sent
// events.
package fakeapi

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"
)

// Script is a queue of scripted turns and a log of requests, safe for
// concurrent use. R is the fake's decoded request type.
type Script[T, R any] struct {
	mu       sync.Mutex
	turns    []T
	next     int
	requests []R
	counters map[string]int
}

// NewScript returns a script playing turns in order.
func NewScript[T, R any](turns []T) *Script[T, R] {
	return &Script[T, R]{turns: append([]T(nil), turns...), counters: map[string]int{}}
}

// Take returns the next turn and its index, or false once the script is
// exhausted.
func (s *Script[T, R]) Take() (T, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	if s.next >= len(s.turns) {
		return zero, -1, false
	}
	s.next++
	return s.turns[s.next-1], s.next - 1, true
}

// Next returns the turn that answers req: the next scripted turn, or what
// its Respond function (as respond reads it, nil for none) makes of req.
// ok is false when the script is exhausted or Respond returned nil.
func (s *Script[T, R]) Next(req R, respond func(T) func(R) *T) (turn T, ok bool) {
	turn, _, ok = s.Take()
	if !ok {
		return turn, false
	}
	if f := respond(turn); f != nil {
		t := f(req)
		if t == nil {
			return turn, false
		}
		turn = *t
	}
	return turn, true
}

// Enqueue appends turns to the script.
func (s *Script[T, R]) Enqueue(turns ...T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// Remaining returns the number of turns not yet consumed.
func (s *Script[T, R]) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns) - s.next
}

// Record appends a request to the log and returns its index.
func (s *Script[T, R]) Record(r R) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	return len(s.requests) - 1
}

// Update changes the logged request at index i, under the script's lock:
// what a fake learns of a request after logging it (its status, the
// response it got).
func (s *Script[T, R]) Update(i int, f func(*R)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.requests[i])
}

// Requests returns the requests recorded so far, in order.
func (s *Script[T, R]) Requests() []R {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]R(nil), s.requests...)
}

// NewID returns a fresh id such as "toolu_0001".
func (s *Script[T, R]) NewID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters[prefix]++
	return fmt.Sprintf("%s_%04d", prefix, s.counters[prefix])
}

// WriteJSON writes v as a JSON reply with the status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// SSE writes server-sent events, flushing each.
type SSE struct {
	w http.ResponseWriter
	f http.Flusher
}

// StartSSE answers 200 with an event stream.
func StartSSE(w http.ResponseWriter) *SSE {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &SSE{w: w, f: f}
}

// Event writes one event: "event: name" when name is not "", then data,
// JSON-encoded unless it is a string.
func (e *SSE) Event(name string, data any) {
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	text, ok := data.(string)
	if !ok {
		b, _ := json.Marshal(data)
		text = string(b)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", text)
	if e.f != nil {
		e.f.Flush()
	}
}

// Chunks splits text after each space, as a model streams words.
func Chunks(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' {
			out = append(out, text[start:i+1])
			start = i + 1
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// Halves splits s in two at a character boundary (for arguments streamed
// in pieces); a short s is one piece.
func Halves(s string) []string {
	i := len(s) / 2
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		return []string{s}
	}
	return []string{s[:i], s[i:]}
}

// Pieces splits s into at most n pieces of about equal length at character
// boundaries (for arguments streamed in many deltas, as the real APIs
// stream them); a short s gives fewer pieces, "" none.
func Pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 && n > 0 {
		i := (len(s) + n - 1) / n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s, n = s[i:], n-1
	}
	return out
}

// Spaced returns the JSON text b with white space inside, as some servers
// and proxies write it: a space after every colon and comma and inside
// every brace and bracket, an empty object too. Strings are left alone.
func Spaced(b []byte) string {
	var out strings.Builder
	in, escaped := false, false
	for _, c := range b {
		switch {
		case in:
			out.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				in = false
			}
		case c == '}' || c == ']':
			out.WriteByte(' ')
			out.WriteByte(c)
		case c == ':' || c == ',' || c == '{' || c == '[':
			out.WriteByte(c)
			out.WriteByte(' ')
		default:
			in = c == '"'
			out.WriteByte(c)
		}
	}
	return out.String()
}

// GzipWriter is a response writer whose body goes out gzip-compressed,
// with Content-Encoding: gzip. Close it to end the body.
type GzipWriter struct {
	http.ResponseWriter
	zw *gzip.Writer
}

// Gzip returns w compressing what is written to it; call it before
// anything is written.
func Gzip(w http.ResponseWriter) *GzipWriter {
	w.Header().Set("Content-Encoding", "gzip")
	return &GzipWriter{ResponseWriter: w, zw: gzip.NewWriter(w)}
}

// Write compresses b into the body.
func (g *GzipWriter) Write(b []byte) (int, error) { return g.zw.Write(b) }

// Flush sends what was compressed so far, as an event stream needs.
func (g *GzipWriter) Flush() {
	_ = g.zw.Flush()
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Close ends the compressed body.
func (g *GzipWriter) Close() error { return g.zw.Close() }
