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
// principal. A tools/call of a tool whose scopes (Options.ToolScopes) the
// token does not grant is answered 403 insufficient_scope. Mount serves it
// together with the resource's metadata.
//
// It serves two generations of the protocol at one endpoint. A request of
// protocol 2026-07-28 or later (its MCP-Protocol-Version header, or the
// io.modelcontextprotocol/protocolVersion of its _meta, names one; a
// server/discover) is served statelessly: no session, and any replica of a
// fleet sharing the guard's store, Options.Store and the Signer's key
// answers it, the answer to an approval question included (see the
// package doc, "Running as a fleet"). A request of an earlier version
// (2025-11-25 and before: initialize, then requests with Mcp-Session-Id) is
// served in a session of this process, bound to the token's principal, so
// that another principal's token cannot use it: in a fleet, a load
// balancer must send each session's requests to the replica that created
// it (affinity on the Mcp-Session-Id header); elsewhere they are answered
// 404 and the client must start again.
func (s *Server) Handler(verify TokenVerifier, opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxRequestBodyBytes <= 0 {
		o.MaxRequestBodyBytes = sdk.DefaultMaxRequestBodyBytes
	}
	server := func(*http.Request) *sdk.Server { return s.srv }
	// The stamp adds a few bytes to a message already bounded.
	limit := o.MaxRequestBodyBytes + 1024
	sessions := sdk.NewStreamableHTTPHandler(server, &sdk.StreamableHTTPOptions{
		MaxRequestBodyBytes: limit,
		SessionTimeout:      o.SessionTimeout,
	})
	// A stateless request's handler goes on when its client goes away: a
	// write that started finishes and is recorded, so that the request
	// sent again replays it instead of finding it cut short.
	stateless := sdk.NewStreamableHTTPHandler(server, &sdk.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: limit,
	})
	return auth.RequireBearerToken(tokenVerifier(verify), &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: o.ResourceMetadataURL,
		ClockSkew:           o.ClockSkew,
	})(s.messages(sessions, stateless, o))
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
// tool whose scopes the token lacks is answered 403 insufficient_scope, a
// tools/call request is stamped, and the request goes to the stateless
// handler when it is of protocol 2026-07-28 or later, to the handler of
// sessions otherwise. Each HTTP request gets a nonce of its own; the
// session id, where there is one, is what the call id is derived from.
func (s *Server) messages(sessions, stateless http.Handler, o HTTPOptions) http.Handler {
	limit := o.MaxRequestBodyBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			sessions.ServeHTTP(w, r) // GET and DELETE name a session
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
		next := sessions
		if modern(r.Header.Get(protocolVersionHeader)) {
			next = stateless
		}
		if m, err := jsonrpc.DecodeMessage(body); err == nil {
			if need := s.httpScopes(r, m); len(need) > 0 {
				insufficientScope(w, need, o.ResourceMetadataURL)
				return
			}
			if req, ok := m.(*jsonrpc.Request); ok {
				if modern(metaProtocolVersion(req)) {
					// The SDK's stateless handler checks that it agrees
					// with the header, and says so when it does not.
					next = stateless
				}
				if stamp(req, newNonce()) {
					if b, err := jsonrpc.EncodeMessage(req); err == nil {
						body = b
					}
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// protocolVersionHeader is the HTTP header naming a request's protocol
// version.
const protocolVersionHeader = "Mcp-Protocol-Version"

// firstStateless is the first protocol version without sessions and
// initialize, served by the stateless handler.
const firstStateless = "2026-07-28"

// modern reports whether a protocol version is of the stateless
// generation. Versions are dates, so they compare as strings.
func modern(version string) bool { return version >= firstStateless }

// metaProtocolVersion returns the protocol version a request names in its
// _meta (io.modelcontextprotocol/protocolVersion, SEP-2575), or "".
func metaProtocolVersion(req *jsonrpc.Request) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(req.Params) == 0 || json.Unmarshal(req.Params, &p) != nil {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Meta[sdk.MetaKeyProtocolVersion], &v)
	return v
}

// stamp writes the nonce and the request id into a tools/call request's
// _meta, and the request's idempotencyKey parameter (SEP-3182), which
// go-sdk's types drop, replacing whatever the client put there under those
// names. It leaves requests it cannot read to the SDK, which answers them
// with an error.
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
	delete(meta, metaRequestKey)
	if key, ok := params["idempotencyKey"]; ok && string(key) != "null" {
		meta[metaRequestKey] = key
	}
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
