package demo

import (
	"context"
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
	tgchat "github.com/toolguard/toolguard/adapters/chat"
	tggemini "github.com/toolguard/toolguard/adapters/gemini"
	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/internal/fakemodel"
	"github.com/toolguard/toolguard/provider"
	"google.golang.org/genai"
)

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
	fake func(turns []fakemodel.Turn) (provider.Provider, func(), error)
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
		fake: func(turns []fakemodel.Turn) (provider.Provider, func(), error) {
			srv := fakemodel.NewOpenAI(turns...)
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
		fake: func(turns []fakemodel.Turn) (provider.Provider, func(), error) {
			srv := fakemodel.NewChat(turns...)
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
		fake: func(turns []fakemodel.Turn) (provider.Provider, func(), error) {
			srv := fakemodel.NewAnthropic(turns...)
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
		fake: func(turns []fakemodel.Turn) (provider.Provider, func(), error) {
			// No call ids, as Gemini 2.x sends: the adapter derives them
			// from the response id and each call's position.
			srv := fakemodel.NewGemini(withoutCallIDs(turns)...)
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
func Provider(w io.Writer, name string, turns ...fakemodel.Turn) (p provider.Provider, close func(), err error) {
	kind, ok := providers[name]
	if !ok {
		return nil, nil, fmt.Errorf("no provider %q: want one of %s", name, strings.Join(Providers(), ", "))
	}
	if p := kind.real(w); p != nil {
		return p, func() {}, nil
	}
	p, close, err = kind.fake(FreshCallIDs(turns))
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

// withoutCallIDs returns the turns with their calls, and those of what
// their Respond functions return, call ids left out.
func withoutCallIDs(turns []fakemodel.Turn) []fakemodel.Turn {
	var strip func(t fakemodel.Turn) fakemodel.Turn
	strip = func(t fakemodel.Turn) fakemodel.Turn {
		t.Calls = append([]fakemodel.Call(nil), t.Calls...)
		for i := range t.Calls {
			t.Calls[i].CallID = ""
		}
		if f := t.Respond; f != nil {
			t.Respond = func(req fakemodel.Request) *fakemodel.Turn {
				next := f(req)
				if next != nil {
					cp := strip(*next)
					next = &cp
				}
				return next
			}
		}
		return t
	}
	out := make([]fakemodel.Turn, len(turns))
	for i, t := range turns {
		out[i] = strip(t)
	}
	return out
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}
