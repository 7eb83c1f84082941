// Command mcp-server serves the conformance world's order tools (package
// orders: get_order, create_refund_draft) as an MCP server through the
// guard, for any MCP client: Claude Desktop, VS Code, the MCP Inspector.
//
//	go run ./examples/mcp-server                          # stdio, for tenant-a / user-1
//	go run ./examples/mcp-server -http 127.0.0.1:19100    # streamable HTTP at /mcp, bearer token printed
//
// Over stdio the calls act for -tenant and -subject (the process's
// configured user). Over HTTP they act for the bearer token's principal:
// the token printed at start stands for -tenant / -subject. Refund drafts
// need a human's approval, which the server asks of the client's user by
// elicitation. Records go to TOOLGUARD_REDIS_URL when set, else to an
// embedded miniredis. Logs go to standard error (standard output is the
// protocol over stdio).
package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	tgmcp "github.com/toolguard/toolguard/adapters/mcp"
	"github.com/toolguard/toolguard/examples/internal/demo"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
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
	token := fs.String("token", "", "with -http: the bearer token (default: a random one, printed)")
	if err := fs.Parse(args); err != nil {
		return err
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
	// Grants are minted by this process from its users' answers and used
	// at once: a key of its own is enough.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	signer, _ := guard.NewSigner(key)
	tools := orders.Tools(orders.NewService())
	g := guard.New(tools, store, guard.Options{Signer: signer})
	srv, err := tgmcp.NewServer(g, tools, tgmcp.Options{
		Name: "toolguard-orders", Principal: &user, Signer: signer,
	})
	if err != nil {
		return err
	}

	if *addr == "" {
		fmt.Fprintf(log, "mcp-server: stdio, for %s / %s\n", user.TenantID, user.SubjectID)
		return srv.Run(ctx, &sdk.StdioTransport{})
	}
	if *token == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		*token = "demo-" + hex.EncodeToString(b)
	}
	want := []byte(*token)
	verify := func(_ context.Context, tok string, _ *http.Request) (guard.Principal, time.Time, error) {
		if subtle.ConstantTimeCompare([]byte(tok), want) != 1 {
			return guard.Principal{}, time.Time{}, errors.New("unknown token")
		}
		return user, time.Now().Add(time.Hour), nil
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler(verify, nil))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	fmt.Fprintf(log, "mcp-server: listening on http://%s/mcp for %s / %s, bearer token %s\n",
		ln.Addr(), user.TenantID, user.SubjectID, *token)
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
