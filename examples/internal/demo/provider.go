package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	tganthropic "github.com/toolguard/toolguard/adapters/anthropic"
	"github.com/toolguard/toolguard/adapters/anthropic/anthropictest"
	tgchat "github.com/toolguard/toolguard/adapters/chat"
	"github.com/toolguard/toolguard/adapters/chat/chattest"
	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	"github.com/toolguard/toolguard/adapters/gemini/geminitest"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/adapters/openai/openaitest"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
	"google.golang.org/genai"
)

// Turn is one reply of a scripted model, written once for every provider.
type Turn struct {
	Text  string
	Calls []Call
	// Respond, if set, decides the reply from the model results the agent
	// sent last (in order).
	Respond func(results []guard.Result) Turn
}

// Call is one tool call of a scripted reply. Provider gives each an id
// fresh to the process, as FreshCallIDs does.
type Call struct{ Name, Arguments, id string }

// Providers are the names Provider knows, sorted.
func Providers() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// providerKind is one provider's real client and offline fake.
type providerKind struct {
	// real returns the real service's provider, or nil when the
	// environment names none.
	real func(w io.Writer) provider.Provider
	// fake starts the offline fake playing the turns.
	fake func(turns []Turn) (provider.Provider, func(), error)
}

var providers = map[string]providerKind{
	"responses": {
		real: func(w io.Writer) provider.Provider {
			if os.Getenv("OPENAI_API_KEY") == "" {
				return nil
			}
			model := envOr("OPENAI_MODEL", tgopenai.DefaultModel)
			fmt.Fprintf(w, "provider:  OpenAI Responses API, model %s\n", model)
			return tgopenai.NewModel(oai.NewClient(), tgopenai.ModelOptions{Name: model})
		},
		fake: func(turns []Turn) (provider.Provider, func(), error) {
			srv := openaitest.NewServer(convert(turns, func(t Turn) openaitest.Turn {
				out := openaitest.Turn{Text: t.Text}
				for _, c := range t.Calls {
					out.Calls = append(out.Calls, openaitest.Call{Name: c.Name, Arguments: c.Arguments, CallID: c.id})
				}
				return out
			}, func(f func(req openaitest.Request) openaitest.Turn) openaitest.Turn {
				return openaitest.Turn{Respond: func(req openaitest.Request) *openaitest.Turn { t := f(req); return &t }}
			}, func(req openaitest.Request) []string {
				var out []string
				for _, o := range req.FunctionCallOutputs() {
					out = append(out, o.Output)
				}
				return out
			})...)
			client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline"))
			return tgopenai.NewModel(client, tgopenai.ModelOptions{Name: "scripted-model"}), srv.Close, nil
		},
	},
	"chat": {
		real: func(w io.Writer) provider.Provider {
			if os.Getenv("OPENAI_API_KEY") == "" && os.Getenv("OPENAI_BASE_URL") == "" {
				return nil
			}
			model := envOr("OPENAI_MODEL", tgchat.DefaultModel)
			var opts []option.RequestOption
			if os.Getenv("OPENAI_API_KEY") == "" {
				opts = append(opts, option.WithAPIKey("local")) // a local OpenAI-compatible server
			}
			fmt.Fprintf(w, "provider:  OpenAI Chat Completions at %s, model %s\n", envOr("OPENAI_BASE_URL", "api.openai.com"), model)
			return tgchat.NewModel(oai.NewClient(opts...), tgchat.ModelOptions{Name: model})
		},
		fake: func(turns []Turn) (provider.Provider, func(), error) {
			srv := chattest.NewServer(convert(turns, func(t Turn) chattest.Turn {
				out := chattest.Turn{Text: t.Text}
				for _, c := range t.Calls {
					out.Calls = append(out.Calls, chattest.Call{Name: c.Name, Arguments: c.Arguments, CallID: c.id})
				}
				return out
			}, func(f func(req chattest.Request) chattest.Turn) chattest.Turn {
				return chattest.Turn{Respond: func(req chattest.Request) *chattest.Turn { t := f(req); return &t }}
			}, func(req chattest.Request) []string {
				var out []string
				for _, m := range req.ToolResults() {
					out = append(out, m.Content)
				}
				return out
			})...)
			client := oai.NewClient(option.WithBaseURL(srv.BaseURL()), option.WithAPIKey("offline"))
			return tgchat.NewModel(client, tgchat.ModelOptions{Name: "scripted-model"}), srv.Close, nil
		},
	},
	"anthropic": {
		real: func(w io.Writer) provider.Provider {
			if os.Getenv("ANTHROPIC_API_KEY") == "" {
				return nil
			}
			model := envOr("ANTHROPIC_MODEL", tganthropic.DefaultModel)
			fmt.Fprintf(w, "provider:  Anthropic Messages API, model %s\n", model)
			return tganthropic.NewModel(sdk.NewClient(), tganthropic.ModelOptions{Name: model})
		},
		fake: func(turns []Turn) (provider.Provider, func(), error) {
			srv := anthropictest.NewServer(convert(turns, func(t Turn) anthropictest.Turn {
				out := anthropictest.Turn{Text: t.Text}
				for _, c := range t.Calls {
					out.Calls = append(out.Calls, anthropictest.Call{Name: c.Name, Input: c.Arguments, ID: c.id})
				}
				return out
			}, func(f func(req anthropictest.Request) anthropictest.Turn) anthropictest.Turn {
				return anthropictest.Turn{Respond: func(req anthropictest.Request) *anthropictest.Turn { t := f(req); return &t }}
			}, func(req anthropictest.Request) []string {
				var out []string
				for _, r := range req.ToolResults() {
					out = append(out, r.Content)
				}
				return out
			})...)
			client := sdk.NewClient(aoption.WithBaseURL(srv.BaseURL()), aoption.WithAPIKey("offline"))
			return tganthropic.NewModel(client, tganthropic.ModelOptions{Name: "scripted-model"}), srv.Close, nil
		},
	},
	"gemini": {
		real: func(w io.Writer) provider.Provider {
			if os.Getenv("GEMINI_API_KEY") == "" && os.Getenv("GOOGLE_API_KEY") == "" {
				return nil
			}
			// The client reads the key (and GOOGLE_GENAI_USE_VERTEXAI,
			// GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION) from the
			// environment.
			client, err := genai.NewClient(context.Background(), &genai.ClientConfig{})
			if err != nil {
				fmt.Fprintf(w, "provider:  Gemini client: %v\n", err)
				return nil
			}
			model := envOr("GEMINI_MODEL", tggemini.DefaultModel)
			fmt.Fprintf(w, "provider:  Gemini API, model %s\n", model)
			return tggemini.NewModel(client, tggemini.ModelOptions{Name: model})
		},
		fake: func(turns []Turn) (provider.Provider, func(), error) {
			srv := geminitest.NewServer(convert(turns, func(t Turn) geminitest.Turn {
				out := geminitest.Turn{Text: t.Text}
				for _, c := range t.Calls {
					// No call ids, as Gemini 2.x sends: the adapter derives
					// them from the response id and each call's position.
					out.Calls = append(out.Calls, geminitest.Call{Name: c.Name, Args: c.Arguments})
				}
				return out
			}, func(f func(req geminitest.Request) geminitest.Turn) geminitest.Turn {
				return geminitest.Turn{Respond: func(req geminitest.Request) *geminitest.Turn { t := f(req); return &t }}
			}, func(req geminitest.Request) []string {
				var out []string
				for _, r := range req.FunctionResponses() {
					b, _ := json.Marshal(r.Response)
					out = append(out, string(b))
				}
				return out
			})...)
			client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "offline", Backend: genai.BackendGeminiAPI,
				HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL()}})
			if err != nil {
				srv.Close()
				return nil, nil, err
			}
			return tggemini.NewModel(client, tggemini.ModelOptions{Name: "scripted-model"}), srv.Close, nil
		},
	},
}

// Provider returns the named provider ("responses", "chat", "anthropic", "gemini"):
// the real service when the environment has its key (OPENAI_API_KEY, or
// OPENAI_BASE_URL for a local OpenAI-compatible server with chat;
// ANTHROPIC_API_KEY; GEMINI_API_KEY or GOOGLE_API_KEY; OPENAI_MODEL,
// ANTHROPIC_MODEL and GEMINI_MODEL pick the model), and
// otherwise an offline fake server playing the turns through the real SDK
// client. close releases the fake.
func Provider(w io.Writer, name string, turns ...Turn) (p provider.Provider, close func(), err error) {
	kind, ok := providers[name]
	if !ok {
		return nil, nil, fmt.Errorf("no provider %q: want one of %s", name, strings.Join(Providers(), ", "))
	}
	if p := kind.real(w); p != nil {
		return p, func() {}, nil
	}
	p, close, err = kind.fake(freshIDs(turns))
	if err != nil {
		return nil, nil, fmt.Errorf("the offline %s fake: %w", name, err)
	}
	fmt.Fprintf(w, "provider:  offline fake %s server (%s)\n", p.Info().APIFamily, realHint[name])
	return p, close, nil
}

var realHint = map[string]string{
	"responses": "set OPENAI_API_KEY for the real API",
	"chat":      "set OPENAI_API_KEY, or OPENAI_BASE_URL for a local OpenAI-compatible server",
	"anthropic": "set ANTHROPIC_API_KEY for the real API",
	"gemini":    "set GEMINI_API_KEY or GOOGLE_API_KEY for the real API",
}

// convert turns the neutral script into one fake's turns: plain turns
// through plain, Respond turns through respond, which the fake calls with
// its request, whose tool results results reads.
func convert[T, R any](turns []Turn, plain func(Turn) T, respond func(func(R) T) T, results func(R) []string) []T {
	out := make([]T, 0, len(turns))
	for _, t := range turns {
		if t.Respond == nil {
			out = append(out, plain(t))
			continue
		}
		f := t.Respond
		out = append(out, respond(func(req R) T {
			var rs []guard.Result
			for _, s := range results(req) {
				var r guard.Result
				if json.Unmarshal([]byte(s), &r) == nil {
					rs = append(rs, r)
				}
			}
			return plain(f(rs))
		}))
	}
	return out
}

// freshIDs gives every call of the turns, and of what their Respond
// functions return, an id unique to this process (see FreshCallIDs).
func freshIDs(turns []Turn) []Turn {
	stamp := newStamp()
	var fresh func(t Turn) Turn
	fresh = func(t Turn) Turn {
		t.Calls = append([]Call(nil), t.Calls...)
		for i := range t.Calls {
			t.Calls[i].id = stamp()
		}
		if f := t.Respond; f != nil {
			t.Respond = func(rs []guard.Result) Turn { return fresh(f(rs)) }
		}
		return t
	}
	out := make([]Turn, len(turns))
	for i, t := range turns {
		out[i] = fresh(t)
	}
	return out
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}
