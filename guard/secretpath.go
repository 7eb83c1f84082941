package guard

import (
	"errors"
	"strconv"
	"strings"
)

// A secret path names members of a tool's arguments or output
// (ToolSpec.SecretArguments, ToolSpec.SecretOutput,
// Invocation.WithholdOutput): segments joined by ".", each a member name
// followed by any number of suffixes:
//
//	name     the member name of an object
//	[]       each element of an array
//	[7]      the element 7 of an array
//	{}       each member of an object, whatever its name (a map's values)
//	#        the string holds JSON text: the rest of the path applies to
//	         the value it encodes
//
// so "api_key", "card.number", "links[].url", "accounts{}.key",
// "body#.token". The first segment may have no name, for an output that
// is itself an array, a map or JSON text: "[].token", "{}.key". A name's
// characters . [ ] { } # and \ are escaped with a backslash (SecretMember).

// SecretMember returns name as the name part of one segment of a secret
// path, its special characters (. [ ] { } # \) escaped with a backslash.
func SecretMember(name string) string {
	if !strings.ContainsAny(name, `.[]{}#\`) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if strings.IndexByte(`.[]{}#\`, name[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	return b.String()
}

// stepKind is one step of a compiled secret path.
type stepKind uint8

const (
	stepMember  stepKind = iota // the member named name
	stepEach                    // each element of an array
	stepIndex                   // the element index of an array
	stepMembers                 // each member of an object
	stepText                    // the string's JSON text
)

type step struct {
	kind  stepKind
	name  string
	index int
}

var errBadPath = errors.New("guard: invalid secret path")

// parseSecretPath compiles one secret path into its steps.
func parseSecretPath(p string) ([]step, error) {
	if p == "" {
		return nil, errBadPath
	}
	var steps []step
	i := 0
	for seg := 0; ; seg++ {
		var name strings.Builder
		named := false
		for i < len(p) {
			c := p[i]
			if c == '\\' {
				if i+1 == len(p) {
					return nil, errBadPath
				}
				name.WriteByte(p[i+1])
				i, named = i+2, true
				continue
			}
			if strings.IndexByte(".[{#", c) >= 0 {
				break
			}
			if c == ']' || c == '}' {
				return nil, errBadPath
			}
			name.WriteByte(c)
			i, named = i+1, true
		}
		if named {
			steps = append(steps, step{kind: stepMember, name: name.String()})
		}
		suffixes := 0
		for i < len(p) && p[i] != '.' {
			switch {
			case strings.HasPrefix(p[i:], "[]"):
				steps, i = append(steps, step{kind: stepEach}), i+2
			case strings.HasPrefix(p[i:], "{}"):
				steps, i = append(steps, step{kind: stepMembers}), i+2
			case p[i] == '#':
				steps, i = append(steps, step{kind: stepText}), i+1
			case p[i] == '[':
				end := strings.IndexByte(p[i:], ']')
				if end < 0 {
					return nil, errBadPath
				}
				n, err := strconv.Atoi(p[i+1 : i+end])
				if err != nil || n < 0 || p[i+1] == '+' {
					return nil, errBadPath
				}
				steps, i = append(steps, step{kind: stepIndex, index: n}), i+end+1
			default:
				return nil, errBadPath
			}
			suffixes++
		}
		if !named && (seg > 0 || suffixes == 0) {
			return nil, errBadPath // only the first segment may name the root
		}
		if i == len(p) {
			return steps, nil
		}
		i++ // the "."
		if i == len(p) {
			return nil, errBadPath
		}
	}
}

// compiledPaths are a tool's secret paths, compiled: err is set when one
// of them is invalid, and then everything they would cover is withheld.
type compiledPaths struct {
	src   []string
	paths [][]step
	err   error
}

func compilePaths(src []string) *compiledPaths {
	c := &compiledPaths{src: src, paths: make([][]step, 0, len(src))}
	for _, p := range src {
		steps, err := parseSecretPath(p)
		if err != nil {
			c.err = err
			return c
		}
		c.paths = append(c.paths, steps)
	}
	return c
}

// state is a position in one of a walk's paths: path p, its step i next.
type state struct{ p, i int32 }

// roots are the states of a walk at the root of the value: every path at
// its first step.
func roots(paths [][]step) []state {
	if len(paths) == 0 {
		return nil
	}
	out := make([]state, len(paths))
	for i := range paths {
		out[i] = state{p: int32(i)}
	}
	return out
}

// accepts reports whether one of the states has reached its path's end: the
// value there is a secret.
func accepts(paths [][]step, states []state) bool {
	for _, s := range states {
		if int(s.i) == len(paths[s.p]) {
			return true
		}
	}
	return false
}

// advance returns the states after entering a member named name (an
// object's, index < 0) or the element index of an array (name "").
func advance(paths [][]step, states []state, name string, index int) []state {
	var out []state
	for _, s := range states {
		path := paths[s.p]
		if int(s.i) == len(path) {
			continue
		}
		st := path[s.i]
		var ok bool
		if index < 0 {
			ok = st.kind == stepMembers || (st.kind == stepMember && st.name == name)
		} else {
			ok = st.kind == stepEach || (st.kind == stepIndex && st.index == index)
		}
		if ok {
			out = append(out, state{p: s.p, i: s.i + 1})
		}
	}
	return out
}

// inText returns the states that continue into a string's JSON text.
func inText(paths [][]step, states []state) []state {
	var out []state
	for _, s := range states {
		if path := paths[s.p]; int(s.i) < len(path) && path[s.i].kind == stepText {
			out = append(out, state{p: s.p, i: s.i + 1})
		}
	}
	return out
}
