package tgmcp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/golang-jwt/jwt/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/redis/go-redis/v9"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
)

// Serve the order tools over streamable HTTP as an OAuth 2.1 protected
// resource: JWT access tokens of the host's authorization server, for this
// endpoint's URI, each call acting for the principal the host reads from
// the token's claims; refunds need the orders:refund scope.
func ExampleServer_Mount() {
	// The authorization server's side, here in the process: a signing key
	// and its JWK Set.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	asMux := http.NewServeMux()
	asMux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]string{
			"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "k1",
			"x": b64(key.X.FillBytes(make([]byte, 32))), "y": b64(key.Y.FillBytes(make([]byte, 32)))}}})
	})
	asLn, _ := net.Listen("tcp", "127.0.0.1:19183")
	go func() { _ = http.Serve(asLn, asMux) }()
	defer asLn.Close()
	issuer := "http://127.0.0.1:19183"

	// The MCP server's side.
	mr, _ := miniredis.Run()
	defer mr.Close()
	store, _ := idem.New(redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()}), idem.Options{})
	tools := orders.Tools(orders.NewService())
	g := guard.New(tools, store, guard.Options{})
	srv, _ := tgmcp.NewServer(g, tools, tgmcp.Options{ToolScopes: map[string][]string{"create_refund_draft": {"orders:refund"}}})
	res := tgmcp.Resource{URI: "http://127.0.0.1:19184/mcp", AuthorizationServers: []string{issuer}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // stops refreshing the keys
	verifier, err := tgmcp.NewJWTVerifier(ctx, tgmcp.JWTOptions{
		Issuer: issuer, Audience: res.URI, JWKSURL: issuer + "/jwks",
		Principal: func(c tgmcp.Claims) (guard.Principal, error) { // the host's rule
			tenant, _ := c.All["tenant"].(string)
			return guard.Principal{TenantID: tenant, SubjectID: c.Subject}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	if err := srv.Mount(mux, res, verifier.Verify, nil); err != nil {
		fmt.Println(err)
		return
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:19184")
	go func() { _ = http.Serve(ln, mux) }()
	defer ln.Close()

	// A client without a token is told where the metadata is.
	resp, _ := http.Post(res.URI, "application/json", nil)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	meta, _ := oauthex.GetProtectedResourceMetadata(ctx, "http://127.0.0.1:19184/.well-known/oauth-protected-resource/mcp", res.URI, nil)
	fmt.Println("authorization servers:", meta.AuthorizationServers, "scopes:", meta.ScopesSupported)

	// A client with a token the authorization server issued for this
	// resource.
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": issuer, "aud": res.URI, "sub": "user-1", "tenant": "tenant-a", "scope": "orders:read",
		"exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k1"
	signed, _ := tok.SignedString(key)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "v1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: res.URI, HTTPClient: &http.Client{Transport: bearer{signed}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()
	r, _ := cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_order", Arguments: map[string]any{"order_ref": "ORDER-7"}})
	out, _ := tgmcp.ModelResult(r)
	fmt.Println("get_order ->", out.Code, string(out.Data))
	_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "create_refund_draft", Arguments: map[string]any{"order_ref": "ORDER-7", "reason": "duplicate"}})
	fmt.Println("create_refund_draft without orders:refund ->", err)
	// Output:
	// 401 Bearer resource_metadata="http://127.0.0.1:19184/.well-known/oauth-protected-resource/mcp"
	// authorization servers: [http://127.0.0.1:19183] scopes: [orders:refund]
	// get_order -> OK {"order_ref":"ORDER-7","status":"paid"}
	// create_refund_draft without orders:refund -> calling "tools/call": sending "tools/call": Forbidden
}
