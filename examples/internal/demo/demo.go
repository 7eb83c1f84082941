// Package demo holds what the example agents share: choosing the real
// OpenAI API or the offline fake provider, and a real Redis or an embedded
// one.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/idem"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/fakemodel"
)

// Client returns a client for the real API when OPENAI_API_KEY is set, and
// otherwise one for a fake provider playing the scripted turns. close
// releases the fake.
//
// The fake's calls get call ids fresh to this process (see FreshCallIDs):
// the fake would otherwise number them call_0001, … on every run, and
// against a Redis that outlives the process a second run would be answered
// with the first run's stored results.
func Client(w io.Writer, turns ...fakemodel.Turn) (client oai.Client, model string, close func()) {
	if os.Getenv("OPENAI_API_KEY") != "" {
		model = os.Getenv("OPENAI_MODEL")
		if model == "" {
			model = "gpt-5.4-mini"
		}
		fmt.Fprintf(w, "provider:  OpenAI API, model %s\n", model)
		return oai.NewClient(), model, func() {}
	}
	srv := fakemodel.NewOpenAI(FreshCallIDs(turns)...)
	fmt.Fprintln(w, "provider:  offline fake Responses server (set OPENAI_API_KEY for the real API)")
	return oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline")), "scripted-model", srv.Close
}

// FreshCallIDs returns the turns with every call that has no call id given
// one unique to this call of FreshCallIDs, "call_<8 hex digits>_<n>", as a
// real provider's ids are unique; calls made by a turn's Respond function
// get one too.
func FreshCallIDs(turns []fakemodel.Turn) []fakemodel.Turn {
	next := newStamp()
	stamp := func(calls []fakemodel.Call) []fakemodel.Call {
		out := append([]fakemodel.Call(nil), calls...)
		for i := range out {
			if out[i].CallID == "" {
				out[i].CallID = next()
			}
		}
		return out
	}
	out := make([]fakemodel.Turn, len(turns))
	for i, t := range turns {
		t.Calls = stamp(t.Calls)
		if respond := t.Respond; respond != nil {
			t.Respond = func(req fakemodel.Request) *fakemodel.Turn {
				next := respond(req)
				if next != nil {
					cp := *next
					cp.Calls = stamp(cp.Calls)
					next = &cp
				}
				return next
			}
		}
		out[i] = t
	}
	return out
}

// newStamp returns a source of call ids unique to this call of newStamp,
// "call_<8 hex digits>_<n>".
func newStamp() func() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	var n atomic.Int64
	return func() string { return fmt.Sprintf("call_%s_%d", tag, n.Add(1)) }
}

// The environment variables naming a real Redis for the examples: the one
// the tests and scripts/redis-up.sh use, and REDIS_URL, accepted as an
// alias when the first is unset.
const (
	EnvRedisURL      = "TOOLGUARD_REDIS_URL"
	EnvRedisURLAlias = "REDIS_URL"
)

// RedisURL returns the Redis URL the examples use and the variable it came
// from: TOOLGUARD_REDIS_URL, else REDIS_URL, else "" (the embedded server).
func RedisURL() (url, from string) {
	for _, name := range []string{EnvRedisURL, EnvRedisURLAlias} {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return v, name
		}
	}
	return "", ""
}

// Redis returns a client for the Redis that RedisURL names, and otherwise
// for an embedded miniredis. close releases it.
func Redis(w io.Writer) (rdb redis.UniversalClient, close func(), err error) {
	if url, from := RedisURL(); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", from, err)
		}
		opt.ContextTimeoutEnabled = true // calls honour their deadline
		c := redis.NewClient(opt)
		if err := c.Ping(context.Background()).Err(); err != nil {
			_ = c.Close()
			return nil, nil, fmt.Errorf("%s: %w", from, err)
		}
		fmt.Fprintf(w, "store:     Redis at %s (from %s); this run's ids are fresh, so nothing is replayed from earlier runs\n", opt.Addr, from)
		return c, func() { _ = c.Close() }, nil
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, nil, err
	}
	c := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()})
	fmt.Fprintln(w, "store:     embedded miniredis (set "+EnvRedisURL+" for a real Redis)")
	return c, func() { _ = c.Close(); mr.Close() }, nil
}

// AuditCount verifies the tenant's audit chain and returns how many records
// it holds. Called before a run, it tells that run's records from those of
// earlier runs on the same Redis.
func AuditCount(ctx context.Context, s guard.AuditLog, tenantID string) (int64, error) {
	n, err := guard.VerifyAudit(ctx, s, tenantID)
	if err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	return n, nil
}

// PrintAudit verifies the tenant's audit chain after a run and prints its
// line; before is AuditCount from before the run, so records left by
// earlier runs on the same Redis are counted apart.
func PrintAudit(ctx context.Context, w io.Writer, s guard.AuditLog, tenantID string, before int64) error {
	n, err := AuditCount(ctx, s, tenantID)
	if err != nil {
		return err
	}
	if before == 0 {
		fmt.Fprintf(w, "audit:     %d records, hash chain verified\n", n)
	} else {
		fmt.Fprintf(w, "audit:     %d records (%d from this run, %d from earlier runs), hash chain verified\n", n, n-before, before)
	}
	return nil
}

// LastOutputs decodes the tool results the agent sent in a request, to
// any of the fake servers.
func LastOutputs(req fakemodel.Request) []guard.Result {
	var out []guard.Result
	for _, o := range req.Results() {
		var r guard.Result
		if json.Unmarshal([]byte(o.Output), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// Store returns the guard's store on the Redis that Redis gives: an
// idem.Store, what agentloop.Options.Store takes.
func Store(rdb redis.UniversalClient) (*idem.Store, error) {
	return idem.New(rdb, idem.Options{})
}
