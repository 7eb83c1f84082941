package toolset

import (
	"fmt"
	"regexp"

	"github.com/toolguard/toolguard/guard"
)

// Declared is a tool that can be offered to a model: a guard.Tool with a
// description and a schema. Every *Tool is one.
type Declared interface {
	guard.Tool
	Name() string
	Description() string
	Schema() *Schema
}

// Set is an immutable collection of tools with unique names. It implements
// guard.Tools.
type Set struct {
	byName map[string]Declared
	order  []Declared
}

var _ guard.Tools = (*Set)(nil)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func checkName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("toolset: tool name %q must match %s", name, nameRE)
	}
	return nil
}

// New returns a set of the tools, in the order given. It fails on a
// duplicate name.
func New(tools ...Declared) (*Set, error) {
	s := &Set{byName: make(map[string]Declared, len(tools))}
	for _, t := range tools {
		if err := checkName(t.Name()); err != nil {
			return nil, err
		}
		if _, dup := s.byName[t.Name()]; dup {
			return nil, fmt.Errorf("toolset: duplicate tool name %q", t.Name())
		}
		s.byName[t.Name()] = t
		s.order = append(s.order, t)
	}
	return s, nil
}

// MustNew is New that panics on error, for declarations at start-up.
func MustNew(tools ...Declared) *Set {
	s, err := New(tools...)
	if err != nil {
		panic(err)
	}
	return s
}

// Lookup implements guard.Tools: the exact, case-sensitive name, or nil.
func (s *Set) Lookup(name string) guard.Tool {
	if t, ok := s.byName[name]; ok {
		return t
	}
	return nil
}

// Tools returns the tools in declaration order.
func (s *Set) Tools() []Declared { return append([]Declared(nil), s.order...) }

// With returns a new set with more tools added.
func (s *Set) With(tools ...Declared) (*Set, error) {
	return New(append(s.Tools(), tools...)...)
}
