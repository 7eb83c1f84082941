package fakemodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// eventStream writes server-sent events, flushing each, for as long as the
// request lasts.
type eventStream struct {
	w   http.ResponseWriter
	f   http.Flusher
	ctx context.Context
}

// startSSE answers 200 with an event stream to r.
func startSSE(w http.ResponseWriter, r *http.Request) *eventStream {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &eventStream{w: w, f: f, ctx: r.Context()}
}

// Event writes one event: "event: name" when name is not "", then data,
// JSON-encoded unless it is a string.
func (e *eventStream) Event(name string, data any) {
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

// Hold keeps the stream open until hold is closed, a turn's way to keep
// a reply streaming while a test does something else; it reports false
// when the request ended first. A nil hold returns true at once.
func (e *eventStream) Hold(hold <-chan struct{}) bool {
	if hold == nil {
		return true
	}
	select {
	case <-hold:
		return true
	case <-e.ctx.Done():
		return false
	}
}

// Wait pauses for d before the next event, as a model takes time to
// write, or until the request ends; d <= 0 does not pause.
func (e *eventStream) Wait(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.ctx.Done():
	}
}
