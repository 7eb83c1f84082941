// Package demo holds what the example agents share: choosing the real
// OpenAI API or the offline fake provider, and a real Redis or an embedded
// one.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/alicebob/miniredis/v2"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/guard"
)

// Client returns a client for the real API when OPENAI_API_KEY is set, and
// otherwise one for a fake provider playing the scripted turns. close
// releases the fake.
func Client(w io.Writer, turns ...openaitest.Turn) (client oai.Client, model string, close func()) {
	if os.Getenv("OPENAI_API_KEY") != "" {
		model = os.Getenv("OPENAI_MODEL")
		if model == "" {
			model = "gpt-5.4-mini"
		}
		fmt.Fprintf(w, "provider:  OpenAI API, model %s\n", model)
		return oai.NewClient(), model, func() {}
	}
	srv := openaitest.NewServer(turns...)
	fmt.Fprintln(w, "provider:  offline fake Responses server (set OPENAI_API_KEY for the real API)")
	return oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline")), "scripted-model", srv.Close
}

// Redis returns a client for REDIS_URL when set, and otherwise for an
// embedded miniredis. close releases it.
func Redis(w io.Writer) (rdb redis.UniversalClient, close func(), err error) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opt.ContextTimeoutEnabled = true // calls honour their deadline
		c := redis.NewClient(opt)
		if err := c.Ping(context.Background()).Err(); err != nil {
			return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		fmt.Fprintf(w, "store:     Redis at %s\n", opt.Addr)
		return c, func() { _ = c.Close() }, nil
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, nil, err
	}
	c := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()})
	fmt.Fprintln(w, "store:     embedded miniredis (set REDIS_URL for a real Redis)")
	return c, func() { _ = c.Close(); mr.Close() }, nil
}

// LastOutputs decodes the tool results the agent sent in a request.
func LastOutputs(req openaitest.Request) []guard.Result {
	var out []guard.Result
	for _, o := range req.FunctionCallOutputs() {
		var r guard.Result
		if json.Unmarshal([]byte(o.Output), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}
