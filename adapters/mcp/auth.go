package tgmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolguard/toolguard/guard"
)

// Token is what a verified bearer token stands for: the principal the
// calls act for, the OAuth scopes it grants (Options.ToolScopes) and when
// it expires.
type Token struct {
	// Principal is who the calls act for; it must be valid
	// (guard.Principal.Validate), or the token is refused.
	Principal guard.Principal
	// Scopes are the OAuth scopes the token grants.
	Scopes []string
	// Expiry is when the token stops being accepted; it must be set.
	Expiry time.Time
}

// TokenVerifier verifies the bearer token of an HTTP request and says what
// it stands for. It returns an error for a token it does not accept; the
// client is answered 401 and never shown the error. JWTVerifier.Verify is
// one, for the access tokens of an OAuth authorization server; a host may
// write its own (a static token for development, an introspection call).
type TokenVerifier func(ctx context.Context, token string, r *http.Request) (Token, error)

// wellKnownPath is where RFC 9728 puts a protected resource's metadata:
// this path, then the resource identifier's path.
const wellKnownPath = "/.well-known/oauth-protected-resource"

// Resource describes the HTTP endpoint as an OAuth 2.1 protected resource,
// as the MCP authorization specification (2025-06-18 and later) has an MCP
// server over HTTP be: its Protected Resource Metadata (RFC 9728) names the
// authorization servers whose tokens it accepts, and a request without a
// valid token is answered 401 with WWW-Authenticate: Bearer
// resource_metadata="…" so that a client can find them.
type Resource struct {
	// URI is the canonical URI of the MCP endpoint, e.g.
	// "https://mcp.example.com/mcp": scheme, host and the endpoint's path,
	// no fragment. It is the metadata's resource, the resource a client
	// asks its authorization server for (RFC 8707), and the audience
	// JWTVerifier requires.
	URI string
	// AuthorizationServers are the issuer identifiers (RFC 8414) of the
	// authorization servers whose tokens the endpoint accepts; at least
	// one.
	AuthorizationServers []string
	// Scopes are the scopes the metadata lists as supported
	// (scopes_supported); default the scopes of Options.ToolScopes.
	Scopes []string
	// Name is the resource_name shown to people; default the server's
	// name.
	Name string
	// Documentation is the resource_documentation URL, if any.
	Documentation string
}

// parse checks the resource and returns its URI parsed.
func (r Resource) parse() (*url.URL, error) {
	u, err := url.Parse(r.URI)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Fragment != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("mcp: resource URI %q: want an absolute URI of scheme, host and path, without query or fragment", r.URI)
	}
	if len(r.AuthorizationServers) == 0 {
		return nil, errors.New("mcp: the resource names no authorization server")
	}
	for _, as := range r.AuthorizationServers {
		if a, err := url.Parse(as); err != nil || (a.Scheme != "https" && a.Scheme != "http") || a.Host == "" {
			return nil, fmt.Errorf("mcp: authorization server %q is not an http(s) issuer URL", as)
		}
	}
	return u, nil
}

// MetadataURL returns the URL of the resource's metadata document: the
// resource URI with wellKnownPath put before its path, e.g.
// "https://mcp.example.com/.well-known/oauth-protected-resource/mcp" for
// "https://mcp.example.com/mcp" (RFC 9728, section 3.1).
func (r Resource) MetadataURL() (string, error) {
	u, err := r.parse()
	if err != nil {
		return "", err
	}
	m := *u
	m.Path = wellKnownPath + strings.TrimSuffix(u.Path, "/")
	m.RawPath = ""
	return m.String(), nil
}

// Metadata returns the resource's Protected Resource Metadata document.
func (r Resource) Metadata() *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               r.URI,
		AuthorizationServers:   slices.Clone(r.AuthorizationServers),
		ScopesSupported:        slices.Clone(r.Scopes),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           r.Name,
		ResourceDocumentation:  r.Documentation,
	}
}

// Mount serves the server on mux as the OAuth protected resource res: the
// streamable HTTP endpoint (Handler) at the path of res.URI, whose 401s
// carry WWW-Authenticate: Bearer resource_metadata="<res.MetadataURL>",
// and the metadata document (go-sdk's auth.ProtectedResourceMetadataHandler)
// at that URL's path and at wellKnownPath itself, for clients that look
// there. It returns an error for a resource that is not well formed, and
// panics, as http.ServeMux does, when one of the paths is already
// registered.
func (s *Server) Mount(mux *http.ServeMux, res Resource, verify TokenVerifier, opts *HTTPOptions) error {
	u, err := res.parse()
	if err != nil {
		return err
	}
	metaURL, _ := res.MetadataURL()
	if res.Name == "" {
		res.Name = s.opts.Name
	}
	if res.Scopes == nil {
		res.Scopes = s.scopes()
	}
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	o.ResourceMetadataURL = metaURL
	path := u.Path
	if path == "" {
		path = "/"
	}
	meta := auth.ProtectedResourceMetadataHandler(res.Metadata())
	mux.Handle(path, s.Handler(verify, &o))
	mux.Handle(wellKnownPath+strings.TrimSuffix(path, "/"), meta)
	if strings.TrimSuffix(path, "/") != "" {
		mux.Handle(wellKnownPath, meta)
	}
	return nil
}

// scopes returns every scope of Options.ToolScopes, sorted, once each.
func (s *Server) scopes() []string {
	var all []string
	for _, sc := range s.opts.ToolScopes {
		all = append(all, sc...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// missingScopes returns the scopes the tool needs that a request's token
// does not grant; none for a request without a token (stdio, in memory).
func (s *Server) missingScopes(tool string, extra *sdk.RequestExtra) []string {
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	return missing(s.opts.ToolScopes[tool], extra.TokenInfo.Scopes)
}

// missing returns the scopes of need that granted lacks.
func missing(need, granted []string) []string {
	var out []string
	for _, sc := range need {
		if !slices.Contains(granted, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// validScope reports whether sc is a scope token of RFC 6749, section 3.3:
// printable ASCII without space, quote or backslash.
func validScope(sc string) bool {
	if sc == "" {
		return false
	}
	for _, c := range []byte(sc) {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// insufficientScope answers a request whose token lacks scopes: 403 with
// the challenge the MCP authorization specification gives for a step-up,
// naming the scopes the call needs.
func insufficientScope(w http.ResponseWriter, need []string, metadataURL string) {
	params := []string{`error="insufficient_scope"`, fmt.Sprintf("scope=%q", strings.Join(need, " "))}
	if metadataURL != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", metadataURL))
	}
	params = append(params, `error_description="the token does not grant the scopes this tool needs"`)
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	http.Error(w, "insufficient scope", http.StatusForbidden)
}

// Claims are the verified claims of a JWT access token, as JWTVerifier
// gives them to the host's JWTOptions.Principal.
type Claims struct {
	Issuer   string
	Subject  string
	Audience []string
	// Scopes are the token's scope claim split at spaces (RFC 9068),
	// or its scp claim when it is a list of strings.
	Scopes []string
	// ClientID is the client_id claim: the client the token was issued
	// to, not who the calls act for.
	ClientID string
	Expiry   time.Time
	// All holds every claim as decoded JSON, for the host's own (a
	// tenant, roles).
	All map[string]any
}

// JWTOptions configure NewJWTVerifier.
type JWTOptions struct {
	// Issuer is the authorization server's issuer identifier; a token's
	// iss must be exactly it.
	Issuer string
	// Audience is the server's canonical resource URI (Resource.URI); a
	// token's aud must name it (RFC 8707; a trailing slash aside,
	// oauthex.MatchesResource), so that a token issued for another
	// resource is refused.
	Audience string
	// JWKSURL is the authorization server's JWK Set (its jwks_uri). The
	// keys are fetched when the verifier is made, again every
	// RefreshInterval, and at once (at most every five minutes) when a
	// token names a key id the set does not have.
	JWKSURL string
	// Principal maps the verified claims to the principal the calls act
	// for (tenant, subject, roles): the host's rule, never anything the
	// request says. An error refuses the token.
	Principal func(Claims) (guard.Principal, error)
	// Algorithms are the signature algorithms accepted; default RS256,
	// RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 and EdDSA.
	// Neither none nor HMAC is accepted whatever is listed here: a
	// resource server holds no shared secret of the authorization server.
	Algorithms []string
	// Leeway is the clock skew tolerated on exp and nbf; default 0.
	Leeway time.Duration
	// RefreshInterval is how often the keys are fetched again; default
	// one hour.
	RefreshInterval time.Duration
	// Client fetches the keys; default http.DefaultClient with a 10-second
	// timeout.
	Client *http.Client
}

// defaultAlgorithms are the asymmetric JWS algorithms of RFC 7518 and 8037.
var defaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// JWTVerifier verifies JWT access tokens of one authorization server for
// one resource: the signature against the server's JWK Set (fetched and
// cached, github.com/MicahParks/keyfunc), then issuer, audience, expiry
// (required) and not-before (github.com/golang-jwt/jwt), then the host's
// Principal. Use its Verify as the TokenVerifier of Handler or Mount.
type JWTVerifier struct {
	opts   JWTOptions
	keys   keyfunc.Keyfunc
	parser *jwt.Parser
}

// NewJWTVerifier returns a verifier for opts, and starts fetching the JWK
// Set; it stops refreshing it when ctx ends. A JWK Set that cannot be
// fetched yet is not an error: tokens are refused until it can be.
func NewJWTVerifier(ctx context.Context, opts JWTOptions) (*JWTVerifier, error) {
	if opts.Issuer == "" || opts.Audience == "" || opts.JWKSURL == "" {
		return nil, errors.New("mcp: a JWT verifier needs the issuer, the audience (the resource URI) and the JWK Set URL")
	}
	if opts.Principal == nil {
		return nil, errors.New("mcp: a JWT verifier needs the host's Principal function")
	}
	algs := opts.Algorithms
	if len(algs) == 0 {
		algs = defaultAlgorithms
	}
	algs = slices.DeleteFunc(slices.Clone(algs), func(a string) bool {
		return a == "none" || strings.HasPrefix(a, "HS")
	})
	if len(algs) == 0 {
		return nil, errors.New("mcp: no asymmetric signature algorithm left to accept")
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{opts.JWKSURL}, keyfunc.Override{
		Client:          client,
		RefreshInterval: opts.RefreshInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("mcp: the JWK Set URL: %w", err)
	}
	p := jwt.NewParser(
		jwt.WithValidMethods(algs),
		jwt.WithIssuer(opts.Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(opts.Leeway),
	)
	return &JWTVerifier{opts: opts, keys: kf, parser: p}, nil
}

// Verify verifies token and returns what it stands for; it is a
// TokenVerifier. Any error means the token is refused (401).
func (v *JWTVerifier) Verify(ctx context.Context, token string, _ *http.Request) (Token, error) {
	c, err := v.Claims(ctx, token)
	if err != nil {
		return Token{}, err
	}
	p, err := v.opts.Principal(c)
	if err != nil {
		return Token{}, fmt.Errorf("mcp: no principal for the token: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Token{}, fmt.Errorf("mcp: the token's principal: %w", err)
	}
	return Token{Principal: p, Scopes: c.Scopes, Expiry: c.Expiry}, nil
}

// Claims verifies token (signature, issuer, audience, expiry) and returns
// its claims, without mapping them to a principal.
func (v *JWTVerifier) Claims(ctx context.Context, token string) (Claims, error) {
	var mc jwt.MapClaims
	if _, err := v.parser.ParseWithClaims(token, &mc, v.keys.KeyfuncCtx(ctx)); err != nil {
		return Claims{}, fmt.Errorf("mcp: token refused: %w", err)
	}
	aud, _ := mc.GetAudience()
	if !oauthex.MatchesResource(aud, v.opts.Audience) {
		return Claims{}, fmt.Errorf("mcp: token refused: it is not issued for %s", v.opts.Audience)
	}
	c := Claims{Audience: aud, All: mc}
	c.Issuer, _ = mc.GetIssuer()
	c.Subject, _ = mc.GetSubject()
	if exp, _ := mc.GetExpirationTime(); exp != nil {
		c.Expiry = exp.Time
	}
	c.ClientID, _ = mc["client_id"].(string)
	if sc, ok := mc["scope"].(string); ok {
		c.Scopes = strings.Fields(sc)
	} else {
		if list, ok := mc["scp"].([]any); ok {
			for _, e := range list {
				if s, ok := e.(string); ok {
					c.Scopes = append(c.Scopes, s)
				}
			}
		}
	}
	return c, nil
}

// httpScopes returns the scopes a POSTed tools/call needs when its token
// lacks any of them (all the tool's scopes, as the challenge names them),
// and nil otherwise.
func (s *Server) httpScopes(r *http.Request, m jsonrpc.Message) []string {
	req, ok := m.(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" || len(s.opts.ToolScopes) == 0 {
		return nil
	}
	var params struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(req.Params, &params) != nil {
		return nil // the SDK answers it invalid params
	}
	need := s.opts.ToolScopes[params.Name]
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil || len(missing(need, ti.Scopes)) == 0 {
		return nil
	}
	return need
}
