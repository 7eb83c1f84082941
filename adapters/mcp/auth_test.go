package tgmcp_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

// The scopes of the orders world over OAuth.
var orderScopes = map[string][]string{
	"get_order":            {"orders:read"},
	toolset.StatusToolName: {"orders:read"},
	"create_refund_draft":  {"orders:refund"},
}

// tenantPrincipal is the host's rule in these tests: tenant from the
// "tenant" claim, subject from sub.
func tenantPrincipal(c tgmcp.Claims) (guard.Principal, error) {
	tenant, _ := c.All["tenant"].(string)
	if tenant == "" {
		return guard.Principal{}, errNoTenant
	}
	return guard.Principal{TenantID: tenant, SubjectID: c.Subject}, nil
}

// oauthWorld is the orders world mounted as a protected resource at
// 127.0.0.1:mcpPort/mcp, accepting the tokens of an authorization server at
// 127.0.0.1:asPort.
type oauthWorld struct {
	*world
	as       *authServer
	resource string // the canonical URI, http://127.0.0.1:mcpPort/mcp
	base     string // http://127.0.0.1:mcpPort
}

func newOAuthWorld(t *testing.T, asPort, mcpPort int) *oauthWorld {
	t.Helper()
	as := newAuthServer(t, asPort)
	w := newWorld(t, tgmcp.Options{ToolScopes: orderScopes})
	base := fmt.Sprintf("http://127.0.0.1:%d", mcpPort)
	res := tgmcp.Resource{URI: base + "/mcp", AuthorizationServers: []string{as.issuer}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := tgmcp.NewJWTVerifier(ctx, tgmcp.JWTOptions{
		Issuer: as.issuer, Audience: res.URI, JWKSURL: as.jwksURL(), Principal: tenantPrincipal,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := w.server.Mount(mux, res, v.Verify, nil); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", mcpPort))
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return &oauthWorld{world: w, as: as, resource: res.URI, base: base}
}

// client connects the go-sdk client with token (none when "").
func (o *oauthWorld) client(t *testing.T, token string) (*sdk.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	if token != "" {
		hc.Transport = bearer{token}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "oauth-test", Version: "v0"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: o.resource, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// initialize POSTs an initialize request with token (none when "") and
// returns the response, its body read.
func (o *oauthWorld) initialize(t *testing.T, token string) (*http.Response, string) {
	t.Helper()
	return post(t, o.resource, token, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
}

func post(t *testing.T, url, token, sid, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// challenge returns the Bearer challenge of a response's WWW-Authenticate.
func challenge(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		t.Fatalf("WWW-Authenticate %q: %v", resp.Header.Values("WWW-Authenticate"), err)
	}
	for _, c := range cs {
		if c.Scheme == "bearer" {
			return c.Params
		}
	}
	t.Fatalf("no Bearer challenge in %q", resp.Header.Values("WWW-Authenticate"))
	return nil
}

// A client without a token is answered 401, and the challenge leads (with
// go-sdk's own discovery client) to the metadata document, which names the
// authorization server; a client with a token of that server works, acting
// for the principal the host reads from the claims.
func TestOAuthResourceServer(t *testing.T) {
	o := newOAuthWorld(t, 19173, 19174)

	resp, _ := o.initialize(t, "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	metaURL := challenge(t, resp)["resource_metadata"]
	if metaURL != o.base+"/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("resource_metadata %q", metaURL)
	}
	meta, err := oauthex.GetProtectedResourceMetadata(context.Background(), metaURL, o.resource, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(meta.AuthorizationServers, []string{o.as.issuer}) || meta.Resource != o.resource ||
		!slices.Equal(meta.ScopesSupported, []string{"orders:read", "orders:refund"}) {
		t.Fatalf("metadata %+v", meta)
	}
	// The root well-known document too, for clients that look there.
	if root, err := oauthex.GetProtectedResourceMetadata(context.Background(), o.base+tgmcp.WellKnownPath, o.resource, http.DefaultClient); err != nil || root.AuthorizationServers[0] != o.as.issuer {
		t.Fatalf("root metadata %+v %v", root, err)
	}
	if _, err := o.client(t, ""); err == nil {
		t.Fatal("a client without a token connected")
	}

	tok := o.as.sign(t, o.as.claims(o.resource, "user-1", "tenant-a", "orders:read orders:refund"))
	cs, err := o.client(t, tok)
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := call(t, cs, "get_order", map[string]any{"order_ref": "ORDER-7"}, nil); res.Code != guard.CodeOK {
		t.Fatalf("get_order: %s", res)
	}
	// ORDER-9 is tenant-b's: the token's tenant is what counts.
	if res, _ := call(t, cs, "get_order", map[string]any{"order_ref": "ORDER-9"}, nil); res.Code != guard.CodeNotFound {
		t.Fatalf("another tenant's order: %s", res)
	}
	tokB := o.as.sign(t, o.as.claims(o.resource, "user-1", "tenant-b", "orders:read"))
	csB, err := o.client(t, tokB)
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := call(t, csB, "get_order", map[string]any{"order_ref": "ORDER-9"}, nil); res.Code != guard.CodeOK {
		t.Fatalf("tenant-b's own order: %s", res)
	}
	// The status tool, with tool left out (absent reads as null).
	if res, _ := call(t, cs, toolset.StatusToolName, map[string]any{"operation_id": "op-none"}, nil); res.Code != guard.CodeNotFound {
		t.Fatalf("status: %s", res)
	}
	if n := o.as.hits.Load(); n != 1 {
		t.Fatalf("the JWK Set was fetched %d times, want once (cached)", n)
	}
}

// Tokens the resource must not accept are answered 401 with the challenge:
// issued for another resource, expired, of another issuer, signed by a key
// the authorization server never published, unsigned, without a tenant
// for the host's rule, or no JWT at all.
func TestOAuthRefusesTokens(t *testing.T) {
	o := newOAuthWorld(t, 19175, 19176)
	good := func() jwt.MapClaims { return o.as.claims(o.resource, "user-1", "tenant-a", "orders:read") }
	with := func(k string, v any) jwt.MapClaims { c := good(); c[k] = v; return c }
	stranger := newAuthServer(t, 0)
	stranger.kid = "key-1" // the same kid as the real server's key, another key
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, good()).SignedString(jwt.UnsafeAllowNoneSignatureType)

	for _, tc := range []struct{ name, token string }{
		{"another audience", o.as.sign(t, with("aud", "http://127.0.0.1:19176/other"))},
		{"another server's audience", o.as.sign(t, with("aud", "https://mcp.example.com/mcp"))},
		{"expired", o.as.sign(t, with("exp", time.Now().Add(-time.Minute).Unix()))},
		{"no expiry", o.as.sign(t, func() jwt.MapClaims { c := good(); delete(c, "exp"); return c }())},
		{"another issuer", o.as.sign(t, with("iss", "http://127.0.0.1:19999"))},
		{"not yet valid", o.as.sign(t, with("nbf", time.Now().Add(time.Hour).Unix()))},
		{"a key never published", stranger.sign(t, good())},
		{"unsigned", none},
		{"no tenant", o.as.sign(t, with("tenant", ""))},
		{"not a JWT", "demo-0123"},
	} {
		resp, body := o.initialize(t, tc.token)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, body)
			continue
		}
		if c := challenge(t, resp); c["resource_metadata"] != o.base+"/.well-known/oauth-protected-resource/mcp" {
			t.Errorf("%s: challenge %v", tc.name, c)
		}
		if _, err := o.client(t, tc.token); err == nil {
			t.Errorf("%s: the client connected", tc.name)
		}
	}
	// The real server's token is still good.
	if resp, body := o.initialize(t, o.as.sign(t, good())); resp.StatusCode != http.StatusOK {
		t.Fatalf("good token: %d %s", resp.StatusCode, body)
	}
}

// The authorization server rotates its key: the first token signed with
// the new key makes the verifier fetch the JWK Set again, and it is
// accepted; the old key's tokens are then refused.
func TestOAuthKeyRotation(t *testing.T) {
	o := newOAuthWorld(t, 19177, 19178)
	old := o.as.sign(t, o.as.claims(o.resource, "user-1", "tenant-a", "orders:read"))
	if resp, _ := o.initialize(t, old); resp.StatusCode != http.StatusOK {
		t.Fatalf("before rotation: %d", resp.StatusCode)
	}
	o.as.rotate(t)
	fresh := o.as.sign(t, o.as.claims(o.resource, "user-1", "tenant-a", "orders:read"))
	if resp, body := o.initialize(t, fresh); resp.StatusCode != http.StatusOK {
		t.Fatalf("new key: %d %s", resp.StatusCode, body)
	}
	if n := o.as.hits.Load(); n != 2 {
		t.Fatalf("JWK Set fetched %d times, want 2", n)
	}
	if resp, _ := o.initialize(t, old); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a revoked key's token: %d", resp.StatusCode)
	}
}

// A call of a tool whose scope the token lacks is answered 403 with the
// step-up challenge (error="insufficient_scope", the scopes it needs, the
// metadata), and never reaches the guard: the refund does not run, and a
// token with the scope then runs it. tools/list still lists every tool.
func TestOAuthToolScopes(t *testing.T) {
	o := newOAuthWorld(t, 19179, 19180)
	readOnly := o.as.sign(t, o.as.claims(o.resource, "user-1", "tenant-a", "orders:read"))

	cs, err := o.client(t, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 3 {
		t.Fatalf("tools/list: %v %v", lt, err)
	}
	refund := &sdk.CallToolParams{Name: "create_refund_draft", Arguments: map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"},
		Meta: sdk.Meta{tgmcp.MetaIdempotencyKey: "scope-refund-1"}}
	if res, _ := call(t, cs, "get_order", map[string]any{"order_ref": "ORDER-7"}, nil); res.Code != guard.CodeOK {
		t.Fatalf("get_order with its scope: %s", res)
	}
	// go-sdk's client (v1.8.0) has no step-up: it reports the 403 and
	// closes its session.
	if _, err := cs.CallTool(context.Background(), refund); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("refund without the scope: %v", err)
	}

	// The 403 as it is on the wire.
	resp, _ := o.initialize(t, readOnly)
	sid := resp.Header.Get("Mcp-Session-Id")
	post(t, o.resource, readOnly, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, body := post(t, o.resource, readOnly, sid,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_refund_draft","arguments":{"order_ref":"ORDER-7","reason":"duplicate"},"_meta":{"toolguard/idempotency_key":"scope-refund-2"}}}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("refund without the scope: %d %s", resp.StatusCode, body)
	}
	c := challenge(t, resp)
	if c["error"] != "insufficient_scope" || c["scope"] != "orders:refund" ||
		c["resource_metadata"] != o.base+"/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("challenge %v", c)
	}
	// A JSON-RPC batch (protocol 2025-03-26 allows one) is not read by the
	// HTTP layer: the server refuses the call itself, before the guard.
	resp, body = post(t, o.resource, readOnly, sid,
		`[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_refund_draft","arguments":{"order_ref":"ORDER-7","reason":"duplicate"},"_meta":{"toolguard/idempotency_key":"scope-refund-3"}}}]`)
	if !strings.Contains(body, "insufficient scope") {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	if n := o.svc.SideEffects(); n != 0 {
		t.Fatalf("%d refunds ran without the scope", n)
	}

	full := o.as.sign(t, o.as.claims(o.resource, "user-1", "tenant-a", "orders:read orders:refund"))
	cs2, err := o.client(t, full)
	if err != nil {
		t.Fatal(err)
	}
	grant := grantFor(t, guard.Call{Principal: user1, Proposal: guard.Proposal{Name: "create_refund_draft",
		Arguments: []byte(`{"order_ref":"ORDER-7","reason":"duplicate"}`)}})
	refund.Meta[tgmcp.MetaApproval] = grant
	if res, _ := call(t, cs2, refund.Name, refund.Arguments, refund.Meta); res.Code != guard.CodeOK {
		t.Fatalf("refund with the scope: %s", res)
	}
	if n := o.svc.SideEffects(); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}

// What a host can get wrong is refused when the server is made, not when
// a client calls: scopes of a tool that does not exist or that are not
// scope tokens, a resource without an authorization server or whose URI is
// not absolute, a verifier without the host's principal rule.
func TestOAuthConfigurationErrors(t *testing.T) {
	w := newWorld(t, tgmcp.Options{})
	tools := orders.Tools(w.svc)
	for name, scopes := range map[string]map[string][]string{
		"unknown tool":   {"no_such_tool": {"x"}},
		"space in scope": {"get_order": {"orders read"}},
		"empty scope":    {"get_order": {""}},
	} {
		if _, err := tgmcp.NewServer(w.g, tools, tgmcp.Options{ToolScopes: scopes}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, res := range map[string]tgmcp.Resource{
		"no authorization server": {URI: "https://mcp.example.com/mcp"},
		"relative URI":            {URI: "/mcp", AuthorizationServers: []string{"https://as.example.com"}},
		"fragment":                {URI: "https://mcp.example.com/mcp#x", AuthorizationServers: []string{"https://as.example.com"}},
		"not an http issuer":      {URI: "https://mcp.example.com/mcp", AuthorizationServers: []string{"javascript:alert(1)"}},
	} {
		if err := w.server.Mount(http.NewServeMux(), res, nil, nil); err == nil {
			t.Errorf("%s: mounted", name)
		}
	}
	if u, err := (tgmcp.Resource{URI: "https://mcp.example.com/tg/mcp", AuthorizationServers: []string{"https://as.example.com"}}).MetadataURL(); err != nil ||
		u != "https://mcp.example.com/.well-known/oauth-protected-resource/tg/mcp" {
		t.Errorf("metadata URL %q %v", u, err)
	}
	if _, err := tgmcp.NewJWTVerifier(context.Background(), tgmcp.JWTOptions{Issuer: "https://as.example.com",
		Audience: "https://mcp.example.com/mcp", JWKSURL: "https://as.example.com/jwks"}); err == nil {
		t.Error("a verifier without Principal")
	}
	if _, err := tgmcp.NewJWTVerifier(context.Background(), tgmcp.JWTOptions{Issuer: "https://as.example.com",
		Audience: "https://mcp.example.com/mcp", JWKSURL: "https://as.example.com/jwks", Principal: tenantPrincipal,
		Algorithms: []string{"HS256", "none"}}); err == nil {
		t.Error("a verifier of HMAC and none only")
	}
}
