package fakemodel

import (
	"compress/gzip"
	"net/http"
)

// gzipWriter is a response writer whose body goes out gzip-compressed,
// with Content-Encoding: gzip. Close it to end the body.
type gzipWriter struct {
	http.ResponseWriter
	zw *gzip.Writer
}

// newGzipWriter returns w compressing what is written to it; call it
// before anything is written.
func newGzipWriter(w http.ResponseWriter) *gzipWriter {
	w.Header().Set("Content-Encoding", "gzip")
	return &gzipWriter{ResponseWriter: w, zw: gzip.NewWriter(w)}
}

// Write compresses b into the body.
func (g *gzipWriter) Write(b []byte) (int, error) { return g.zw.Write(b) }

// Flush sends what was compressed so far, as an event stream needs.
func (g *gzipWriter) Flush() {
	_ = g.zw.Flush()
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Close ends the compressed body.
func (g *gzipWriter) Close() error { return g.zw.Close() }
