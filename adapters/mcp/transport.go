package tgmcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connect serves one connection over t (stdio, in memory, any
// sdk.Transport) on behalf of Options.Principal, and returns at once; the
// session runs until the client closes it or ctx ends.
func (s *Server) Connect(ctx context.Context, t sdk.Transport) (*sdk.ServerSession, error) {
	return s.srv.Connect(ctx, stampTransport{t}, nil)
}

// Run serves one connection over t until the client closes it or ctx
// ends, e.g. Run(ctx, &mcp.StdioTransport{}) in a process a desktop client
// starts.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.srv.Run(ctx, stampTransport{t})
}

// HTTPOptions configure Handler and Mount.
type HTTPOptions struct {
	// MaxRequestBodyBytes bounds one POSTed message; default
	// sdk.DefaultMaxRequestBodyBytes (4 MiB). A larger body is answered
	// 413 and the server goes on serving.
	MaxRequestBodyBytes int64
	// SessionTimeout closes sessions idle that long; default none.
	SessionTimeout time.Duration
	// ResourceMetadataURL is the URL of the endpoint's Protected Resource
	// Metadata (Resource.MetadataURL), named in the WWW-Authenticate
	// header of every 401 and 403 (resource_metadata). Mount sets it.
	ResourceMetadataURL string
	// ClockSkew is tolerated on a token's expiry; default none.
	ClockSkew time.Duration
}

// Handler returns the streamable HTTP handler of the server. Every request
// must carry a bearer token that verify accepts (go-sdk's
// auth.RequireBearerToken); one without a valid token is answered 401,
// with WWW-Authenticate: Bearer resource_metadata="…" when
// opts.ResourceMetadataURL is set. The calls act for the token's
// principal, and a session is bound to it, so another principal's token
// cannot use it. A tools/call of a tool whose scopes (Options.ToolScopes)
// the token does not grant is answered 403 insufficient_scope. Mount
// serves it together with the resource's metadata.
func (s *Server) Handler(verify TokenVerifier, opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxRequestBodyBytes <= 0 {
		o.MaxRequestBodyBytes = sdk.DefaultMaxRequestBodyBytes
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv },
		&sdk.StreamableHTTPOptions{
			// The stamp adds a few bytes to a message already bounded.
			MaxRequestBodyBytes: o.MaxRequestBodyBytes + 1024,
			SessionTimeout:      o.SessionTimeout,
		})
	return auth.RequireBearerToken(tokenVerifier(verify), &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: o.ResourceMetadataURL,
		ClockSkew:           o.ClockSkew,
	})(s.messages(h, o))
}

// principalKey holds the verified principal in auth.TokenInfo.Extra.
const principalKey = "toolguard/principal"

func tokenVerifier(verify TokenVerifier) auth.TokenVerifier {
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		t, err := verify(ctx, token, r)
		if err != nil || t.Principal.Validate() != nil {
			return nil, auth.ErrInvalidToken
		}
		p := t.Principal
		return &auth.TokenInfo{
			// The streamable handler binds each session to its user.
			UserID:     strconv.Itoa(len(p.TenantID)) + ":" + p.TenantID + p.SubjectID,
			Scopes:     t.Scopes,
			Expiration: t.Expiry,
			Extra:      map[string]any{principalKey: p},
		}, nil
	}
}

// stampTransport stamps the tools/call requests of its connections with
// the connection's nonce and the JSON-RPC request id.
type stampTransport struct{ sdk.Transport }

// Connect implements sdk.Transport.
func (t stampTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &stampConn{Connection: c, nonce: newNonce()}, nil
}

type stampConn struct {
	sdk.Connection
	nonce string
}

// Read implements sdk.Connection.
func (c *stampConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok && err == nil {
		stamp(req, c.nonce)
	}
	return m, err
}

// messages reads a POSTed message before the SDK does: a tools/call of a
// tool whose scopes the token lacks is answered 403 insufficient_scope, and
// a tools/call request is stamped. Each HTTP request gets a nonce of its
// own; the session id, where there is one, is what the call id is derived
// from.
func (s *Server) messages(next http.Handler, o HTTPOptions) http.Handler {
	limit := o.MaxRequestBodyBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("request body over %d bytes", limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "failed to read the request body", http.StatusBadRequest)
			return
		}
		if m, err := jsonrpc.DecodeMessage(body); err == nil {
			if need := s.httpScopes(r, m); len(need) > 0 {
				insufficientScope(w, need, o.ResourceMetadataURL)
				return
			}
			if req, ok := m.(*jsonrpc.Request); ok && stamp(req, newNonce()) {
				if b, err := jsonrpc.EncodeMessage(req); err == nil {
					body = b
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// stamp writes the nonce and the request id into a tools/call request's
// _meta, replacing whatever the client put there. It leaves requests it
// cannot read to the SDK, which answers them with an error.
func stamp(req *jsonrpc.Request, nonce string) bool {
	if req.Method != "tools/call" || !req.ID.IsValid() {
		return false
	}
	var id string
	switch v := req.ID.Raw().(type) {
	case int64:
		id = "n" + strconv.FormatInt(v, 10)
	case string:
		id = "s" + v
	default:
		return false
	}
	params := map[string]json.RawMessage{}
	if len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params, &params); err != nil || params == nil {
			return false
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return false
		}
	}
	meta[metaRequest], _ = json.Marshal(nonce + " " + id)
	params["_meta"], _ = json.Marshal(meta)
	b, err := json.Marshal(params)
	if err != nil {
		return false
	}
	req.Params = b
	return true
}

// cut splits a stamp into its nonce and request id.
func cut(stamp string) (nonce, id string, ok bool) {
	return strings.Cut(stamp, " ")
}

func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
