package fakemodel

import "net/http"

// refusal is an error answer: an HTTP status and its JSON error body, in
// the API's format.
type refusal struct {
	// Status is the HTTP status.
	Status int
	// Header holds reply headers; each name's values replace the reply's
	// own (Content-Type too).
	Header http.Header
	// Body is the error body, written as JSON.
	Body any
}

// retryNow returns the header that has the SDKs retry an error reply at
// once: retry-after-ms 0 (they prefer it over retry-after, and otherwise
// back off for about half a second).
func retryNow() http.Header { return http.Header{"Retry-After-Ms": {"0"}} }

// setHeaders replaces the headers in dst named in src (any spelling).
func setHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst.Del(k)
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}
