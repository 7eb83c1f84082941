// Command toolcases runs tool-call conformance case files through the whole
// path of a call: the OpenAI adapter, the guard, the store and back.
//
//	go run ./cmd/toolcases [-adapter responses|chat|anthropic|gemini|mcp] [-store URL|ADDRS [-keep]] [-json] FILE...
//
// -adapter picks the path each step takes to the guard (default
// responses): for a provider adapter, the proposal is encoded as that
// provider's wire tool call, decoded by the adapter, dispatched, and its
// result mapped into the provider's tool-result shape, from which the model
// result is read; with mcp, each step is a tools/call from an MCP client to
// the adapters/mcp server, connected in memory.
//
// Each case runs in a fresh world: an embedded miniredis by default; with
// -store, a store on a real server with a namespace of the case's own:
// Redis (redis://host:port/db) or a Redis Cluster (host:port,host:port,…)
// with a key prefix, deleted after the case unless -keep (which prints
// "KEYS <case> prefix <prefix> tenant <tenant>" per case, for cmd/toolaudit
// -prefix … -tenant … -verify); or Postgres (postgres://…/db) with a schema
// of the case's own in that database (package pgstore), dropped after the
// case unless -keep (which prints "SCHEMA <case> schema <schema> tenant
// <tenant>", for cmd/toolaudit -schema …). -redis is -store's older name. It
// prints PASS or FAIL per case, then "N passed, N failed", and exits 1 if
// any case failed and 2 if a file could not be read or is malformed. A case
// with a call the adapter's wire cannot carry at all (Gemini's arguments
// are an object: arguments that are not one, or that repeat a member,
// never arrive) prints NOT CARRIED and the reason; it is neither passed
// nor failed, and the summary counts it ("…, N not carried by ADAPTER").
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/pgopen"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/pgstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolcases", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeAddr := fs.String("store", "", "the store's server: a redis:// URL, a comma-separated host:port list for a Redis Cluster, or a postgres:// URL (default: embedded miniredis)")
	fs.StringVar(storeAddr, "redis", "", "the same as -store (its older name)")
	adapterName := fs.String("adapter", "responses", "the adapter each step goes through: mcp (tools/call over an in-memory MCP session) or a provider adapter: "+strings.Join(cases.AdapterNames(), ", "))
	asJSON := fs.Bool("json", false, "also print each step's model result and audit record as JSON")
	keep := fs.Bool("keep", false, "with -store: keep each case's keys (or schema) and print its key prefix (or schema), for cmd/toolaudit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: toolcases [-adapter NAME] [-store URL|ADDRS [-keep]] [-json] FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	runCase := cases.Run
	adapter, ok := cases.Adapters[*adapterName]
	switch {
	case *adapterName == "mcp":
		runCase = cases.RunMCP
	case !ok:
		fmt.Fprintf(stderr, "toolcases: -adapter %q: want mcp or one of %s\n", *adapterName, strings.Join(cases.AdapterNames(), ", "))
		return 2
	}
	var files []*cases.File
	for _, path := range fs.Args() {
		f, err := cases.Load(path)
		if err != nil {
			fmt.Fprintf(stderr, "toolcases: %s: %v\n", path, err)
			return 2
		}
		files = append(files, f)
	}

	var (
		shared redis.UniversalClient
		pool   *pgxpool.Pool
	)
	switch {
	case pgopen.Is(*storeAddr):
		p, err := pgopen.Open(*storeAddr, 4)
		if err != nil {
			fmt.Fprintf(stderr, "toolcases: -store: %v\n", err)
			return 2
		}
		defer p.Close()
		pool = p
	case *storeAddr != "":
		c, err := redisconn.Open(*storeAddr, 0)
		if err != nil {
			fmt.Fprintf(stderr, "toolcases: -store: %v\n", err)
			return 2
		}
		defer c.Close()
		shared = c
	}
	var run [8]byte
	_, _ = rand.Read(run[:])
	runID := hex.EncodeToString(run[:])

	ctx := context.Background()
	passed, failed, notCarried := 0, 0, 0
	for _, f := range files {
		for i := range f.Cases {
			c := &f.Cases[i]
			n := passed + failed + notCarried
			var (
				w   cases.World
				err error
			)
			if pool != nil {
				w, err = pgWorld(ctx, pool, fmt.Sprintf("tgcases_%s_%d", runID, n), *keep)
			} else {
				w, err = world(shared, fmt.Sprintf("tgcases:%s:%d:", runID, n), *keep)
			}
			if err != nil {
				fmt.Fprintf(stderr, "toolcases: %v\n", err)
				return 2
			}
			w.Adapter = adapter
			rep := runCase(ctx, c, w)
			w.Close()
			switch {
			case *keep && shared != nil:
				fmt.Fprintf(stdout, "KEYS %s prefix tgcases:%s:%d: tenant %s\n", c.ID, runID, n, c.Principal.TenantID)
			case *keep && pool != nil:
				fmt.Fprintf(stdout, "SCHEMA %s schema tgcases_%s_%d tenant %s\n", c.ID, runID, n, c.Principal.TenantID)
			}
			switch {
			case rep.NotCarried != "":
				notCarried++
				fmt.Fprintf(stdout, "NOT CARRIED %s: %s\n", c.ID, rep.NotCarried)
			case rep.Passed():
				passed++
				fmt.Fprintf(stdout, "PASS %s\n", c.ID)
			default:
				failed++
				printFailure(stdout, rep)
			}
			if *asJSON {
				printJSON(stdout, rep)
			}
		}
	}
	if notCarried > 0 {
		// A case the adapter's wire cannot carry says nothing about it;
		// say how many, so a reader sees what was not run.
		fmt.Fprintf(stdout, "%d passed, %d failed, %d not carried by %s\n", passed, failed, notCarried, *adapterName)
	} else {
		fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func printFailure(w io.Writer, rep *cases.CaseReport) {
	if rep.Err != nil {
		fmt.Fprintf(w, "FAIL %s: %v\n", rep.ID, rep.Err)
	}
	for _, s := range rep.Steps {
		for _, m := range s.Mismatch {
			fmt.Fprintf(w, "FAIL %s %s: %s\n", rep.ID, s.StepID, m)
		}
	}
}

func printJSON(w io.Writer, rep *cases.CaseReport) {
	for _, s := range rep.Steps {
		line, _ := json.Marshal(struct {
			Case   string            `json:"case"`
			Step   string            `json:"step"`
			Result json.RawMessage   `json:"model_result"`
			Audit  []json.RawMessage `json:"audit"`
		}{rep.ID, s.StepID, s.Result, auditJSON(s)})
		fmt.Fprintln(w, string(line))
	}
}

func auditJSON(s cases.StepReport) []json.RawMessage {
	out := []json.RawMessage{}
	for _, r := range s.Audit {
		b, err := json.Marshal(r)
		if err == nil {
			out = append(out, b)
		}
	}
	return out
}

// pgWorld returns a fresh world on Postgres: a store in a schema of its
// own, dropped when the case is done unless keep.
func pgWorld(ctx context.Context, pool *pgxpool.Pool, schema string, keep bool) (cases.World, error) {
	s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: schema})
	if err != nil {
		return cases.World{}, err
	}
	if keep {
		return cases.World{Store: s, Close: func() {}}, nil
	}
	return cases.World{Store: s, Close: func() { _ = pgopen.DropSchema(context.Background(), pool, schema) }}, nil
}

// world returns a fresh world: its own miniredis, or its own key prefix on
// the shared server.
func world(shared redis.UniversalClient, prefix string, keep bool) (cases.World, error) {
	if shared != nil {
		s, err := idem.New(shared, idem.Options{Prefix: prefix})
		if err != nil {
			return cases.World{}, err
		}
		if keep {
			return cases.World{Store: s, Close: func() {}}, nil
		}
		// The world's keys go when the case is done.
		return cases.World{Store: s, Close: func() { _ = redisconn.DeletePrefix(context.Background(), shared, prefix) }}, nil
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return cases.World{}, errors.New("starting embedded miniredis: " + err.Error())
	}
	c := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()})
	s, err := idem.New(c, idem.Options{Prefix: prefix})
	if err != nil {
		return cases.World{}, err
	}
	return cases.World{Store: s, Close: func() { c.Close(); mr.Close() }}, nil
}
