package approvals

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
)

// DefaultRole is the role that decides requests when InboxOptions.Role is
// empty.
const DefaultRole = "approver"

// InboxOptions configures an Inbox.
type InboxOptions struct {
	Queue *Queue
	// Authenticate returns who is asking, from the host's session or
	// token. An error answers 401. Required.
	Authenticate func(*http.Request) (guard.Principal, error)
	// Role is the role, in the request's tenant, needed to see and decide
	// requests; default DefaultRole.
	Role string
	// AllowSelfApproval lets a person decide a request made for them;
	// by default nobody approves their own request.
	AllowSelfApproval bool
	// CSRFKey signs the forms' CSRF tokens: at least 32 secret bytes, the
	// same in every process that serves the inbox. Default: random per
	// Inbox, so a form outlives neither a restart nor another replica.
	CSRFKey []byte
	// Title heads every page; default "Approvals".
	Title string
	// Log receives errors of the store; default slog.Default().
	Log *slog.Logger
	// Details, when set, returns what the approver should see of the
	// resource a request acts on (an order's status and customer, say),
	// shown beside the request; it is asked each time a request's page is
	// shown, so it says how things stand now, not when the agent asked.
	// The request is the tenant's own: the hook looks the resource up for
	// that tenant only. An error shows that the details could not be
	// read, and the page still lets the approver decide.
	Details func(ctx context.Context, r *Request) ([]Detail, error)
}

// Detail is one line of what the host shows of a request's resource.
// Every part is shown as text (escaped like everything on the page).
type Detail struct {
	// Label names the line ("Order status").
	Label string `json:"label"`
	// Text is its value.
	Text string `json:"text"`
	// URL, when set, links the text; only an http or https URL is linked,
	// any other is shown as text.
	URL string `json:"url,omitempty"`
}

// Inbox is the approvers' http.Handler: mount it under a path of the
// host's server with http.StripPrefix, e.g.
//
//	mux.Handle("/approvals/", http.StripPrefix("/approvals", inbox))
//
// It serves, relative to that path:
//
//	GET  /                              the tenant's pending requests (HTML)
//	GET  /r/{id}                        one request, with Approve and Deny
//	POST /r/{id}                        decide (form: csrf, decision=approve|deny, message, note)
//	GET  /api/requests                  the pending requests (JSON)
//	GET  /api/requests/{id}             one request (JSON)
//	POST /api/requests/{id}/decision    decide: {"approve":true,"reason":"…","note":"…"} (JSON)
//
// Pages are server-rendered, need no JavaScript and load nothing from
// elsewhere; every response carries a Content-Security-Policy of
// default-src 'none' (the one style block allowed by a nonce, forms posting
// only to the inbox, no framing). Every POST passes net/http's
// CrossOriginProtection; a form POST also needs the CSRF token the page
// gave (HMAC-bound to the approver, valid 12 hours), and an API POST needs
// Content-Type application/json, which no cross-site form can send.
type Inbox struct {
	store   *Queue
	details func(context.Context, *Request) ([]Detail, error)
	auth    func(*http.Request) (guard.Principal, error)
	role    string
	self    bool
	key     []byte
	title   string
	log     *slog.Logger
	tmpl    *template.Template
	routes  http.Handler
}

//go:embed inbox.tmpl
var tmplFS embed.FS

// NewInbox returns the inbox.
func NewInbox(opts InboxOptions) (*Inbox, error) {
	if opts.Queue == nil || opts.Authenticate == nil {
		return nil, errors.New("approvals: NewInbox needs a Queue and Authenticate")
	}
	in := &Inbox{store: opts.Queue, details: opts.Details, auth: opts.Authenticate, role: opts.Role, self: opts.AllowSelfApproval,
		key: opts.CSRFKey, title: opts.Title, log: opts.Log}
	if in.role == "" {
		in.role = DefaultRole
	}
	if in.title == "" {
		in.title = "Approvals"
	}
	if in.log == nil {
		in.log = slog.Default()
	}
	switch {
	case in.key == nil:
		in.key = make([]byte, 32)
		_, _ = rand.Read(in.key)
	case len(in.key) < 32:
		return nil, errors.New("approvals: the CSRF key must be at least 32 bytes")
	}
	t, err := template.ParseFS(tmplFS, "inbox.tmpl")
	if err != nil {
		return nil, err
	}
	in.tmpl = t
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", in.page(in.list))
	mux.HandleFunc("GET /r/{id}", in.page(in.show))
	mux.HandleFunc("POST /r/{id}", in.page(in.decideForm))
	mux.HandleFunc("GET /api/requests", in.api(in.apiList))
	mux.HandleFunc("GET /api/requests/{id}", in.api(in.apiGet))
	mux.HandleFunc("POST /api/requests/{id}/decision", in.api(in.apiDecide))
	in.routes = http.NewCrossOriginProtection().Handler(mux)
	return in, nil
}

// ServeHTTP serves the inbox.
func (in *Inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	in.routes.ServeHTTP(w, r)
}

// httpError is a failure with the status and text a person or client sees.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

var errNotFound = &httpError{http.StatusNotFound, "There is no such request."}

// approver authenticates the caller and checks the role.
func (in *Inbox) approver(r *http.Request) (guard.Principal, error) {
	p, err := in.auth(r)
	if err != nil || p.Validate() != nil {
		return guard.Principal{}, &httpError{http.StatusUnauthorized, "Sign in to see approval requests."}
	}
	if !p.HasRole(in.role) {
		return p, &httpError{http.StatusForbidden, "You do not have the " + in.role + " role that decides approval requests."}
	}
	return p, nil
}

// asHTTP maps store errors to what the caller is told.
func (in *Inbox) asHTTP(err error) *httpError {
	var he *httpError
	var de *DecidedError
	switch {
	case errors.As(err, &he):
		return he
	case errors.Is(err, ErrNotFound):
		return errNotFound
	case errors.Is(err, ErrExpired):
		return &httpError{http.StatusConflict, "This request expired before anyone decided it; the agent was told no."}
	case errors.Is(err, ErrOwnRequest):
		return &httpError{http.StatusForbidden, "You asked for this; someone else must decide it."}
	case errors.As(err, &de):
		return &httpError{http.StatusConflict, fmt.Sprintf("%s already %s this request at %s.", de.DecidedBy, de.Status, de.DecidedAt.UTC().Format("2006-01-02 15:04:05 UTC"))}
	}
	in.log.Error("approvals inbox", "err", err)
	return &httpError{http.StatusServiceUnavailable, "The approvals store is unavailable; try again shortly."}
}

// view is a request prepared for a page.
type view struct {
	*Request
	Fields                  []fieldView
	Asked, Expires, Decided string
	// Details are the host's lines about the resource; DetailsError says
	// they could not be read.
	Details      []detailView
	DetailsError bool
}

type detailView struct {
	Detail
	// Link is URL when it is http or https, else "".
	Link string
}

// withDetails asks the host's hook for the request's details.
func (in *Inbox) withDetails(ctx context.Context, v *view) {
	if in.details == nil {
		return
	}
	ds, err := in.details(ctx, v.Request)
	if err != nil {
		in.log.Warn("approvals inbox: details", "request", v.ID, "err", err)
		v.DetailsError = true
		return
	}
	for _, d := range ds {
		dv := detailView{Detail: d}
		if u, err := url.Parse(d.URL); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
			dv.Link = u.String()
		}
		v.Details = append(v.Details, dv)
	}
}

type fieldView struct {
	Field
	Shown shownValue
}

func (in *Inbox) view(r *Request) view {
	v := view{Request: r, Asked: when(r.CreatedAt, in.store.clock.Now()), Expires: when(r.ExpiresAt, in.store.clock.Now())}
	if !r.DecidedAt.IsZero() {
		v.Decided = when(r.DecidedAt, in.store.clock.Now())
	}
	for _, f := range r.Arguments {
		fv := fieldView{Field: f}
		if !f.Hidden {
			fv.Shown = showValue(f.Value)
		}
		v.Fields = append(v.Fields, fv)
	}
	return v
}

// when renders a time with how far it is from now.
func when(t, now time.Time) string {
	d := t.Sub(now).Round(time.Minute)
	rel := "now"
	switch {
	case d >= time.Minute:
		rel = "in " + span(d)
	case d <= -time.Minute:
		rel = span(-d) + " ago"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC") + " (" + rel + ")"
}

func span(d time.Duration) string {
	if d >= time.Hour {
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d min", int(d.Minutes()))
}

// pageData is what every page gets.
type pageData struct {
	Title, Nonce, Base string
	Approver           guard.Principal
	Requests           []view
	Request            *view
	CanDecide          bool
	Why, CSRF          string
	Notice, Error      string
	Heading            string
	// Recent are the tenant's latest decisions, on the list page.
	Recent []AuditRecord
}

func (in *Inbox) page(f func(http.ResponseWriter, *http.Request, guard.Principal, *pageData) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var nb [16]byte
		_, _ = rand.Read(nb[:])
		d := &pageData{Title: in.title, Nonce: base64.RawStdEncoding.EncodeToString(nb[:]), Base: "./"}
		if r.PathValue("id") != "" {
			d.Base = "../"
		}
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+d.Nonce+
			"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		p, err := in.approver(r)
		d.Approver = p
		if err == nil {
			err = f(w, r, p, d)
		}
		if err != nil {
			he := in.asHTTP(err)
			d.Heading, d.Error = http.StatusText(he.status), he.msg
			in.render(w, he.status, "message", d)
		}
	}
}

func (in *Inbox) render(w http.ResponseWriter, status int, name string, d *pageData) {
	var b strings.Builder
	if err := in.tmpl.ExecuteTemplate(&b, name, d); err != nil {
		in.log.Error("approvals inbox: template", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

func (in *Inbox) list(w http.ResponseWriter, r *http.Request, p guard.Principal, d *pageData) error {
	reqs, err := in.store.Pending(r.Context(), p.TenantID, 0)
	if err != nil {
		return err
	}
	for _, q := range reqs {
		d.Requests = append(d.Requests, in.view(q))
	}
	if d.Recent, err = in.store.recent(r.Context(), p.TenantID, recentDecisions); err != nil {
		return err
	}
	in.render(w, http.StatusOK, "list", d)
	return nil
}

// recentDecisions is how many decisions the list page shows.
const recentDecisions = 20

func (in *Inbox) show(w http.ResponseWriter, r *http.Request, p guard.Principal, d *pageData) error {
	req, err := in.store.Get(r.Context(), p.TenantID, r.PathValue("id"))
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("done") {
	case "approved":
		d.Notice = "You approved this request. The agent's run continues by itself."
	case "denied":
		d.Notice = "You denied this request. The agent is told it was not approved."
	}
	in.showRequest(r.Context(), w, http.StatusOK, p, req, d)
	return nil
}

func (in *Inbox) showRequest(ctx context.Context, w http.ResponseWriter, status int, p guard.Principal, req *Request, d *pageData) {
	v := in.view(req)
	in.withDetails(ctx, &v)
	d.Request = &v
	switch {
	case req.Status != StatusPending:
	case req.RequestedBy == p.SubjectID && !in.self:
		d.Why = "You asked for this; someone else must decide it."
	default:
		d.CanDecide, d.CSRF = true, in.csrfToken(p, in.store.clock.Now())
	}
	in.render(w, status, "request", d)
}

// maxFormBytes bounds a decision's body.
const maxFormBytes = 16 << 10

func (in *Inbox) decideForm(w http.ResponseWriter, r *http.Request, p guard.Principal, d *pageData) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return &httpError{http.StatusBadRequest, "The form could not be read."}
	}
	if !in.csrfValid(r.PostForm.Get("csrf"), p, in.store.clock.Now()) {
		return &httpError{http.StatusForbidden, "This form is out of date or did not come from the inbox. Open the request again and decide there."}
	}
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		return &httpError{http.StatusBadRequest, "Choose Approve or Deny."}
	}
	id := r.PathValue("id")
	// Two fields, never mixed: "message" is told to the model (with a
	// denial), "note" only to the audit log.
	dec := host.Decision{Approved: approve, Reason: strings.TrimSpace(r.PostForm.Get("message")), Note: strings.TrimSpace(r.PostForm.Get("note"))}
	req, err := in.store.Decide(r.Context(), p, id, dec, in.self)
	if err != nil {
		he := in.asHTTP(err)
		if he.status != http.StatusConflict && he.status != http.StatusForbidden {
			return he
		}
		cur, gerr := in.store.Get(r.Context(), p.TenantID, id)
		if gerr != nil {
			return he
		}
		d.Error = he.msg
		in.showRequest(r.Context(), w, he.status, p, cur, d)
		return nil
	}
	// A relative Location, resolved by the browser against this page's
	// URL: the inbox does not know where the host mounted it
	// (http.Redirect would make it absolute from the stripped path).
	w.Header().Set("Location", req.ID+"?done="+string(req.Status))
	w.WriteHeader(http.StatusSeeOther)
	return nil
}

// csrfLife is how long a form's token is good.
const csrfLife = 12 * time.Hour

func (in *Inbox) csrfMAC(p guard.Principal, issued int64) string {
	m := hmac.New(sha256.New, in.key)
	fmt.Fprintf(m, "toolguard-inbox-csrf\x00%d\x00%s\x00%s", issued, p.TenantID, p.SubjectID)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (in *Inbox) csrfToken(p guard.Principal, now time.Time) string {
	issued := now.Unix()
	return strconv.FormatInt(issued, 10) + "." + in.csrfMAC(p, issued)
}

func (in *Inbox) csrfValid(tok string, p guard.Principal, now time.Time) bool {
	ts, mac, ok := strings.Cut(tok, ".")
	issued, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil {
		return false
	}
	age := now.Sub(time.Unix(issued, 0))
	return age > -time.Minute && age < csrfLife && hmac.Equal([]byte(mac), []byte(in.csrfMAC(p, issued)))
}

// The JSON API.

func (in *Inbox) api(f func(*http.Request, guard.Principal) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		p, err := in.approver(r)
		var body any
		if err == nil {
			body, err = f(r, p)
		}
		status := http.StatusOK
		if err != nil {
			he := in.asHTTP(err)
			status, body = he.status, map[string]string{"error": he.msg}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
}

func (in *Inbox) apiList(r *http.Request, p guard.Principal) (any, error) {
	reqs, err := in.store.Pending(r.Context(), p.TenantID, 0)
	if reqs == nil {
		reqs = []*Request{}
	}
	return map[string]any{"requests": reqs}, err
}

func (in *Inbox) apiGet(r *http.Request, p guard.Principal) (any, error) {
	return in.store.Get(r.Context(), p.TenantID, r.PathValue("id"))
}

func (in *Inbox) apiDecide(r *http.Request, p guard.Principal) (any, error) {
	if mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(strings.ToLower(mt)) != "application/json" {
		return nil, &httpError{http.StatusUnsupportedMediaType, "Send the decision as application/json."}
	}
	var body struct {
		Approve *bool  `json:"approve"`
		Reason  string `json:"reason"`
		Note    string `json:"note"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxFormBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Approve == nil {
		return nil, &httpError{http.StatusBadRequest, `Send {"approve": true|false, "reason": "… (told to the model)", "note": "… (audit only)"}.`}
	}
	return in.store.Decide(r.Context(), p, r.PathValue("id"), host.Decision{Approved: *body.Approve, Reason: body.Reason, Note: body.Note}, in.self)
}
