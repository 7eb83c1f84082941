// Command mcp-server serves the conformance world's order tools (package
// orders: get_order, create_refund_draft) as an MCP server through the
// guard, for any MCP client: Claude Desktop, VS Code, the MCP Inspector.
//
//	go run ./examples/mcp-server                          # stdio, for tenant-a / user-1
//	go run ./examples/mcp-server -http 127.0.0.1:19100    # streamable HTTP at /mcp, bearer token printed
//	go run ./examples/mcp-server -http 127.0.0.1:19100 \
//		-issuer https://auth.example.com -jwks https://auth.example.com/jwks   # an OAuth 2.1 resource server
//
// Over stdio the calls act for -tenant and -subject (the process's
// configured user). Over HTTP they act for the bearer token's principal:
// the token printed at start stands for -tenant / -subject, for
// development. With -issuer and -jwks the endpoint is an OAuth protected
// resource as the MCP authorization specification has it: it publishes
// its metadata (RFC 9728) at /.well-known/oauth-protected-resource/mcp,
// naming -issuer; answers a request without a valid token 401 with
// WWW-Authenticate: Bearer resource_metadata="…"; and accepts JWT access
// tokens of that issuer for -resource (default http://ADDR/mcp) whose
// signature its JWK Set verifies. A token's principal is its "tenant"
// claim (-tenant-claim), its sub and its "roles"; get_order and the status
// tool need the scope orders:read, create_refund_draft orders:refund
// (403 insufficient_scope without it). -token then also accepts that
// static token, with every scope. Refund drafts
// need a human's approval, which the server asks of the client's user by
// elicitation. Records go to TOOLGUARD_REDIS_URL when set, else to an
// embedded miniredis. Logs go to standard error (standard output is the
// protocol over stdio), a line for each execution of a write among them.
//
// Over HTTP it serves protocol 2026-07-28 statelessly and 2025-11-25 in
// sessions (tgmcp.Server.Handler). To run it as a fleet, start several
// with the same TOOLGUARD_REDIS_URL and the same TOOLGUARD_MCP_KEY (hex of
// at least 32 random bytes: the key that signs grants and seals request
// states), behind any load balancer: a 2026-07-28 client may reach any of
// them with any request, the answer to an approval question and the
// polls of a task included; a 2025-11-25 session needs affinity on its
// Mcp-Session-Id header. Without TOOLGUARD_MCP_KEY the key is random, for
// this process alone.
package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/examples/internal/demo"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/toolset"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-server:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log io.Writer) error {
	fs := flag.NewFlagSet("mcp-server", flag.ContinueOnError)
	fs.SetOutput(log)
	addr := fs.String("http", "", "serve streamable HTTP at this address (path /mcp) instead of stdio")
	tenant := fs.String("tenant", "tenant-a", "the principal's tenant")
	subject := fs.String("subject", "user-1", "the principal's subject")
	token := fs.String("token", "", "with -http: a static bearer token for development, standing for -tenant / -subject with every scope (default without -issuer: a random one, printed)")
	issuer := fs.String("issuer", "", "with -http: the OAuth authorization server (issuer) whose JWT access tokens are accepted")
	jwks := fs.String("jwks", "", "with -issuer: the authorization server's JWK Set URL")
	resource := fs.String("resource", "", "with -issuer: the canonical URI of this MCP endpoint, the tokens' audience (default http://ADDR/mcp)")
	tenantClaim := fs.String("tenant-claim", "tenant", "with -issuer: the claim that names the principal's tenant")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*issuer == "") != (*jwks == "") {
		return errors.New("-issuer and -jwks go together")
	}
	user := guard.Principal{TenantID: *tenant, SubjectID: *subject}
	if err := user.Validate(); err != nil {
		return err
	}

	rdb, closeRedis, err := demo.Redis(log)
	if err != nil {
		return err
	}
	defer closeRedis()
	store, err := idem.New(rdb, idem.Options{Prefix: "tg-mcp-demo:"})
	if err != nil {
		return err
	}
	key, err := approvalKey(log)
	if err != nil {
		return err
	}
	signer, err := guard.NewSigner(key)
	if err != nil {
		return fmt.Errorf("%s: %w", envKey, err)
	}
	tools := logWrites(orders.Tools(orders.NewService()), log)
	g := guard.New(tools, store, guard.Options{Signer: signer})
	srv, err := tgmcp.NewServer(g, tools, tgmcp.Options{
		Name: "toolguard-orders", Principal: &user, Signer: signer,
		ToolScopes: toolScopes,
		// The answers to approval questions and the tasks, shared by
		// every replica on this Redis.
		State: tgmcp.NewRedisStateStore(rdb, "tg-mcp-demo:mcp:"),
	})
	if err != nil {
		return err
	}

	if *addr == "" {
		fmt.Fprintf(log, "mcp-server: stdio, for %s / %s\n", user.TenantID, user.SubjectID)
		return srv.Run(ctx, &sdk.StdioTransport{})
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *issuer == "" && *token == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		*token = "demo-" + hex.EncodeToString(b)
	}
	static := staticToken(*token, user)
	mux := http.NewServeMux()
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	if *issuer == "" {
		mux.Handle("/mcp", srv.Handler(static, nil))
	} else {
		if *resource == "" {
			*resource = endpoint
		} else if u, err := url.Parse(*resource); err == nil {
			endpoint = "http://" + ln.Addr().String() + u.Path // where Mount serves it
		}
		jwt, err := tgmcp.NewJWTVerifier(ctx, tgmcp.JWTOptions{
			Issuer: *issuer, Audience: *resource, JWKSURL: *jwks,
			Principal: func(c tgmcp.Claims) (guard.Principal, error) { return claimsPrincipal(c, *tenantClaim) },
		})
		if err != nil {
			return err
		}
		verify := jwt.Verify
		if *token != "" {
			verify = func(ctx context.Context, tok string, r *http.Request) (tgmcp.Token, error) {
				if t, err := static(ctx, tok, r); err == nil {
					return t, nil
				}
				return jwt.Verify(ctx, tok, r)
			}
		}
		res := tgmcp.Resource{URI: *resource, AuthorizationServers: []string{*issuer}}
		if err := srv.Mount(mux, res, verify, nil); err != nil {
			return err
		}
		meta, _ := res.MetadataURL()
		fmt.Fprintf(log, "mcp-server: a protected resource for %s, of the authorization server %s; metadata at %s\n", *resource, *issuer, meta)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if *token != "" {
		fmt.Fprintf(log, "mcp-server: listening on %s for %s / %s, bearer token %s\n",
			endpoint, user.TenantID, user.SubjectID, *token)
	} else {
		fmt.Fprintf(log, "mcp-server: listening on %s for the principals of the tokens of %s\n", endpoint, *issuer)
	}
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// envKey names the environment variable holding the approval key, in hex:
// every replica of a fleet must have the same.
const envKey = "TOOLGUARD_MCP_KEY"

// approvalKey returns the key of TOOLGUARD_MCP_KEY, or a random one for
// this process alone.
func approvalKey(log io.Writer) ([]byte, error) {
	if v := strings.TrimSpace(os.Getenv(envKey)); v != "" {
		key, err := hex.DecodeString(v)
		if err != nil || len(key) < 32 {
			return nil, fmt.Errorf("%s must be the hex of at least 32 bytes", envKey)
		}
		fmt.Fprintf(log, "mcp-server: approval key from %s\n", envKey)
		return key, nil
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	fmt.Fprintf(log, "mcp-server: a random approval key, for this process alone (set %s to run several)\n", envKey)
	return key, nil
}

// loggedWrite is a write tool that says on the log each time it runs.
type loggedWrite struct {
	toolset.Declared
	log io.Writer
}

// Execute implements guard.Tool.
func (t loggedWrite) Execute(ctx context.Context, inv *guard.Invocation) (json.RawMessage, error) {
	out, err := t.Declared.Execute(ctx, inv)
	fmt.Fprintf(t.log, "mcp-server: executed %s for %s / %s\n", t.Name(), inv.Principal.TenantID, inv.Principal.SubjectID)
	return out, err
}

// logWrites returns the set with each write logging its executions.
func logWrites(set *toolset.Set, log io.Writer) *toolset.Set {
	var tools []toolset.Declared
	for _, t := range set.Tools() {
		if t.Spec().Effect == guard.Write {
			t = loggedWrite{Declared: t, log: log}
		}
		tools = append(tools, t)
	}
	return toolset.MustNew(tools...)
}

// toolScopes are the scopes a bearer token must grant for each tool.
var toolScopes = map[string][]string{
	"get_order":              {"orders:read"},
	"query_operation_status": {"orders:read"},
	"create_refund_draft":    {"orders:refund"},
}

// allScopes are the scopes of toolScopes: what the static token grants.
var allScopes = []string{"orders:read", "orders:refund"}

// staticToken accepts the one token want (none when want is ""), for
// development: it stands for user, with every scope, for an hour at a
// time.
func staticToken(want string, user guard.Principal) tgmcp.TokenVerifier {
	return func(_ context.Context, tok string, _ *http.Request) (tgmcp.Token, error) {
		if want == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(want)) != 1 {
			return tgmcp.Token{}, errors.New("unknown token")
		}
		return tgmcp.Token{Principal: user, Scopes: allScopes, Expiry: time.Now().Add(time.Hour)}, nil
	}
}

// claimsPrincipal is this server's rule for a token's principal: the tenant
// from the claim named tenantClaim, the subject from sub, the roles from
// "roles" (a list of strings).
func claimsPrincipal(c tgmcp.Claims, tenantClaim string) (guard.Principal, error) {
	tenant, _ := c.All[tenantClaim].(string)
	if tenant == "" {
		return guard.Principal{}, fmt.Errorf("the token has no %q claim", tenantClaim)
	}
	p := guard.Principal{TenantID: tenant, SubjectID: c.Subject}
	if roles, ok := c.All["roles"].([]any); ok {
		for _, r := range roles {
			if s, ok := r.(string); ok {
				p.Roles = append(p.Roles, s)
			}
		}
	}
	return p, nil
}
