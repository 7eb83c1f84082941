package tgadk

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/tool"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/toolset"
)

// Toolset is an ADK toolset (an mcptoolset, any tool.Toolset) behind the
// guard. Its tools are known only when ADK lists them, within a run; each
// listed tool is imported (Import) then, with the options the host gives
// for its name, and is found by Lookup from then on. Give it to the guard
// through Join and to the integration through Options.Toolsets. It is safe
// for concurrent use.
type Toolset struct {
	inner tool.Toolset
	opts  func(name string) host.ImportOptions

	mu     sync.RWMutex
	byName map[string]imported
}

// imported is a listed tool as imported, with the declaration it was
// imported from, to notice a changed one.
type imported struct {
	t    *Tool
	decl string
}

var _ guard.Tools = (*Toolset)(nil)

// ImportToolset returns the ADK toolset ts behind the guard. opts gives the
// import options of each tool it lists, by name (whether it is a read,
// needs approval, who may call it: host.ImportOptions.Authorize is required).
func ImportToolset(ts tool.Toolset, opts func(name string) host.ImportOptions) (*Toolset, error) {
	if ts == nil || opts == nil {
		return nil, errors.New("tgadk: ImportToolset needs a toolset and the options of its tools")
	}
	return &Toolset{inner: ts, opts: opts, byName: map[string]imported{}}, nil
}

// Name returns the ADK toolset's name.
func (s *Toolset) Name() string { return s.inner.Name() }

// Lookup implements guard.Tools: the tool of that exact name the toolset
// listed last, or nil.
func (s *Toolset) Lookup(name string) guard.Tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if it, ok := s.byName[name]; ok {
		return it.t
	}
	return nil
}

// list lists the ADK toolset's tools now and imports them; a tool listed
// before with the same declaration is the same *Tool.
func (s *Toolset) list(ctx agent.ReadonlyContext) ([]*Tool, error) {
	tools, err := s.inner.Tools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Tool, 0, len(tools))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tools {
		r, ok := t.(runnable)
		if !ok {
			return nil, fmt.Errorf("tgadk: toolset %q lists %T, not a function tool", s.inner.Name(), t)
		}
		d, err := json.Marshal(r.Declaration())
		if err != nil {
			return nil, fmt.Errorf("tgadk: toolset %q tool %q declaration: %w", s.inner.Name(), r.Name(), err)
		}
		if prev, ok := s.byName[r.Name()]; ok && prev.decl == string(d) {
			out = append(out, prev.t)
			continue
		}
		var opts host.ImportOptions
		if err := safely(func() error { opts = s.opts(r.Name()); return nil }); err != nil {
			return nil, err
		}
		it, err := Import(t, opts)
		if err != nil {
			return nil, err
		}
		s.byName[r.Name()] = imported{t: it, decl: string(d)}
		out = append(out, it)
	}
	return out, nil
}

// Join returns the tools a guard over a set and imported toolsets looks up:
// the set's first, then each toolset's, in order. Pass it to guard.New,
// and the same set and toolsets to New.
func Join(set *toolset.Set, toolsets ...*Toolset) guard.Tools {
	return joined{set: set, toolsets: append([]*Toolset(nil), toolsets...)}
}

type joined struct {
	set      *toolset.Set
	toolsets []*Toolset
}

// Lookup implements guard.Tools.
func (j joined) Lookup(name string) guard.Tool {
	if j.set != nil {
		if t := j.set.Lookup(name); t != nil {
			return t
		}
	}
	for _, ts := range j.toolsets {
		if t := ts.Lookup(name); t != nil {
			return t
		}
	}
	return nil
}

// adkToolset is an imported toolset as the agent sees it: each listed tool
// as a guarded ADK tool.
type adkToolset struct {
	a  *Guarded
	ts *Toolset
}

// Name implements tool.Toolset: the imported toolset's name.
func (s *adkToolset) Name() string { return s.ts.Name() }

// Tools lists and imports the toolset's tools and returns them guarded. It
// fails for a tool whose name the set or the status tool already has, and
// for one the guard does not find (a guard not made over Join).
func (s *adkToolset) Tools(ctx agent.ReadonlyContext) ([]tool.Tool, error) {
	tools, err := s.ts.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]tool.Tool, 0, len(tools))
	for _, t := range tools {
		if s.a.set.Lookup(t.Name()) != nil || t.Name() == s.a.status {
			return nil, fmt.Errorf("tgadk: toolset %q lists %q, a name the agent's tools already have", s.ts.Name(), t.Name())
		}
		if s.a.g.Tools().Lookup(t.Name()) == nil {
			return nil, fmt.Errorf("tgadk: the guard does not find tool %q of toolset %q: make it over tgadk.Join", t.Name(), s.ts.Name())
		}
		out = append(out, &adkTool{a: s.a, d: t})
	}
	return out, nil
}
