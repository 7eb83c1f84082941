// Package replay serves recorded provider API traffic to the adapters'
// tests: it loads the recordings (real HTTP responses of the provider
// APIs, recorded by other public projects) and serves each recording's
// responses, byte for byte with their status, content type and encoding,
// from a local httptest server that keeps the request bodies it received.
// [Drive] plays a recording through an adapter's provider.Provider, turn
// by turn, as package agentloop would, checking each reply against the
// recording and handing each follow-up request, with the recorded one, to
// the adapter's own checks.
//
// The recordings are not part of the repository: the tests read them from
// the recordings folder of $TOOLGUARD_RECORDED_TRAFFIC ([EnvDir]) when it
// is set, else of testdata/recorded-traffic at the repository root, and
// never from a path outside the repository otherwise ([Dir]). Where they
// are absent, [ForAPI] skips the test, saying so and naming the variable.
package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// EnvDir is the environment variable naming the recorded traffic's folder,
// the one holding recordings/, when it is not testdata/recorded-traffic in
// the repository.
const EnvDir = "TOOLGUARD_RECORDED_TRAFFIC"

// Dir returns the folder of the recordings: recordings/ in the folder
// $TOOLGUARD_RECORDED_TRAFFIC names when it is set, else in
// testdata/recorded-traffic at the repository root (found from the
// working directory up). It skips t, naming both, when that folder does
// not exist.
func Dir(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvDir)
	if base == "" {
		base = filepath.Join(repoRoot(), "testdata", "recorded-traffic")
	}
	dir := filepath.Join(base, "recordings")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no recorded traffic at %s: set %s to the folder holding the recordings/ of the recorded traffic (or put it at testdata/recorded-traffic): %v", dir, EnvDir, err)
	}
	return dir
}

// repoRoot returns the repository root: the nearest folder at or above the
// working directory whose go.mod is the core module's ("." when none is).
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/toolguard/toolguard\n") {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "."
		}
		dir = up
	}
}

// Recording is one recorded exchange: the responses served in order, the
// requests the recorder sent, and what each response holds.
type Recording struct {
	// File is the path the recording was loaded from.
	File string `json:"-"`
	// Raw is the whole file, for fields this type does not name.
	Raw json.RawMessage `json:"-"`

	// Name names the recording (the file's name without .json).
	Name string `json:"name"`
	// API is the API family: "responses", "chat" (OpenAI Chat Completions
	// and the OpenAI-compatible servers, whose names begin "compat-"),
	// "anthropic" or "gemini".
	API string `json:"api"`
	// Mode qualifies the API: "stateless" (Responses with store false),
	// "vertex" (Gemini on Vertex AI), "" for none.
	Mode string `json:"mode"`
	// Stream reports whether the responses are server-sent events.
	Stream bool `json:"stream"`
	// BodyFidelity says how the bodies were kept ("exact" for the bytes as
	// sent).
	BodyFidelity string `json:"body_fidelity"`
	// Source names the repository, path and commit it was taken from.
	Source json.RawMessage `json:"source"`
	// Tools are the tools the recorded requests offered.
	Tools []Tool `json:"tools"`
	// Interactions are the recorded responses, served in order.
	Interactions []Interaction `json:"interactions"`
	// Requests are the recorded request bodies, one per interaction; an
	// entry is null (len 0 or "null") where the recorder kept none.
	Requests []json.RawMessage `json:"recorded_requests"`
	// Expect says what each response holds.
	Expect []Turn `json:"expect"`
	// ExpectEnd is how a run over all the responses ends.
	ExpectEnd End `json:"expect_end"`
}

// Tool is a tool a recorded request offered.
type Tool struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Parameters is its parameters' JSON Schema.
	Parameters json.RawMessage `json:"parameters"`
}

// Interaction is one recorded response.
type Interaction struct {
	// Status is the HTTP status.
	Status int `json:"status"`
	// ContentType and ContentEncoding are the response's headers ("" for
	// none).
	ContentType     string `json:"content_type"`
	ContentEncoding string `json:"content_encoding"`
	// Body is the body as sent (gzip bytes where ContentEncoding is gzip).
	Body []byte `json:"-"`
	// BodyBase64 is the body as the file holds it.
	BodyBase64 string `json:"body_base64"`
}

// Turn is what one recorded response holds.
type Turn struct {
	// Raw is the turn as the file holds it, for fields this type does not
	// name (Gemini's signatures, chunks, usage).
	Raw json.RawMessage `json:"-"`

	// ResponseID is the response's id (a completion's, a message's).
	ResponseID string `json:"response_id"`
	// Stop is the API's stop or finish reason.
	Stop string `json:"stop"`
	// Text is the response's text.
	Text string `json:"text"`
	// Calls are its tool calls, in order.
	Calls []Call `json:"calls"`
	// Refusal is its refusal text, "" for none.
	Refusal string `json:"refusal"`
	// IncompleteReason is why it was cut short, "" when it was not.
	IncompleteReason string `json:"incomplete_reason"`
	// Notes say what else it holds (a thinking block, its signature).
	Notes []string `json:"notes"`
}

// UnmarshalJSON decodes a turn and keeps its raw form.
func (t *Turn) UnmarshalJSON(b []byte) error {
	type plain Turn
	if err := json.Unmarshal(b, (*plain)(t)); err != nil {
		return err
	}
	t.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// Call is one recorded tool call.
type Call struct {
	// Raw is the call as the file holds it.
	Raw json.RawMessage `json:"-"`

	// ID is the call id as the API sent it, "" where it sent none.
	ID string `json:"id"`
	// Name is the tool called.
	Name string `json:"name"`
	// Arguments are the arguments as the API sent them (assembled from
	// the deltas of a stream).
	Arguments string `json:"arguments"`
}

// UnmarshalJSON decodes a call and keeps its raw form.
func (c *Call) UnmarshalJSON(b []byte) error {
	type plain Call
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	c.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// End is how a run over a recording ends.
type End struct {
	// Status is the run's status: "completed", "incomplete", "refused",
	// "failed", or "exhausted" when the last response still had calls.
	Status string `json:"status"`
	// Reason is the provider's reason ("" for none).
	Reason string `json:"reason"`
	// Output is the run's final text.
	Output string `json:"output"`
}

// Request returns the recorded request body of interaction i decoded as a
// JSON object, or nil when none was recorded.
func (r *Recording) Request(i int) map[string]any {
	if i >= len(r.Requests) {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(r.Requests[i], &m) != nil {
		return nil
	}
	return m
}

// Parse decodes one recording file's contents.
func Parse(b []byte) (*Recording, error) {
	var rec Recording
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	rec.Raw = append(json.RawMessage(nil), b...)
	for i := range rec.Interactions {
		it := &rec.Interactions[i]
		body, err := base64.StdEncoding.DecodeString(it.BodyBase64)
		if err != nil {
			return nil, fmt.Errorf("interaction %d: body_base64: %w", i, err)
		}
		it.Body = body
	}
	return &rec, nil
}

// ErrNoRecordings is returned by Load when dir holds no recording.
var ErrNoRecordings = errors.New("replay: no recordings")

// Load reads every recording (*.json) in dir, in file name order. An
// absent dir, or one without recordings, is an error wrapping
// ErrNoRecordings.
func Load(dir string) ([]*Recording, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s: %v", ErrNoRecordings, dir, err)
		}
		return nil, fmt.Errorf("%w at %s", ErrNoRecordings, dir)
	}
	slices.Sort(files)
	recs := make([]*Recording, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rec, err := Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rec.File = f
		recs = append(recs, rec)
	}
	return recs, nil
}

// ForAPI returns the recordings in [Dir] whose API is api: it skips t,
// naming the folder and [EnvDir], when there are no recordings there, and
// fails it when loading fails or none is of that API.
func ForAPI(t testing.TB, api string) []*Recording {
	t.Helper()
	dir := Dir(t)
	all, err := Load(dir)
	if errors.Is(err, ErrNoRecordings) {
		t.Skipf("no recorded traffic at %s (set %s to the folder holding it): %v", dir, EnvDir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var recs []*Recording
	for _, r := range all {
		if r.API == api {
			recs = append(recs, r)
		}
	}
	if len(recs) == 0 {
		t.Fatalf("no recording with api %q at %s", api, dir)
	}
	return recs
}

// Received is one request the server received.
type Received struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path, Query its raw query.
	Path  string
	Query string
	// Header is the request's header.
	Header http.Header
	// Body is the request body, gunzipped when the client sent it gzip.
	Body []byte
}

// Server serves one recording's interactions in order, one per request,
// and keeps the requests it received. A request beyond the last
// interaction gets 410 Gone.
type Server struct {
	// Server is the underlying test server; its URL is the base URL.
	*httptest.Server

	rec      *Recording
	mu       sync.Mutex
	next     int
	received []Received
}

// NewServer starts a server serving rec. Close it when done.
func NewServer(rec *Recording) *Server {
	s := &Server{rec: rec}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// Start starts a server serving rec and closes it when t ends.
func Start(t testing.TB, rec *Recording) *Server {
	t.Helper()
	s := NewServer(rec)
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, err = io.ReadAll(zr)
		}
	}
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.received = append(s.received, Received{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body})
	i := s.next
	s.next++
	s.mu.Unlock()
	if i >= len(s.rec.Interactions) {
		http.Error(w, fmt.Sprintf("replay: recording %s has %d responses, this is request %d", s.rec.Name, len(s.rec.Interactions), i+1), http.StatusGone)
		return
	}
	it := s.rec.Interactions[i]
	if it.ContentType != "" {
		w.Header().Set("Content-Type", it.ContentType)
	}
	if it.ContentEncoding != "" {
		w.Header().Set("Content-Encoding", it.ContentEncoding)
	}
	w.WriteHeader(it.Status)
	_, _ = w.Write(it.Body)
}

// Received returns the requests received so far, in order.
func (s *Server) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

// Bodies returns the bodies of the requests received so far, in order.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.received))
	for i, r := range s.received {
		out[i] = r.Body
	}
	return out
}

// Body returns the body of request i decoded as a JSON object; it fails t
// when there is no request i or its body is not one.
func (s *Server) Body(t testing.TB, i int) map[string]any {
	t.Helper()
	bodies := s.Bodies()
	if i >= len(bodies) {
		t.Fatalf("replay: %d requests received, want request %d", len(bodies), i+1)
	}
	var m map[string]any
	if err := json.Unmarshal(bodies[i], &m); err != nil {
		t.Fatalf("replay: request %d is not a JSON object: %v\n%s", i+1, err, bodies[i])
	}
	return m
}

// Remaining returns how many interactions have not been served.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(0, len(s.rec.Interactions)-s.next)
}

// Payloads returns the JSON payloads of a recorded response, gunzipped: a
// stream's data lines, in order, or the whole body of a JSON response.
func (it Interaction) Payloads() ([][]byte, error) {
	body := it.Body
	if it.ContentEncoding == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	if !strings.HasPrefix(it.ContentType, "text/event-stream") {
		return [][]byte{body}, nil
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
			out = append(out, bytes.Clone(bytes.TrimSpace(data)))
		}
	}
	return out, sc.Err()
}
