// Package secretcorpus is the corpus of issue 40: fake secrets of every
// common shape, in every context a tool's output puts text, and
// look-alikes that are not secrets. The detector's tests (module
// secretscan) and the tests of every sink the guard writes to use this one
// corpus, so that "found" and "never leaks" are measured over the same
// texts.
//
// Every value is made at run time by a seeded generator: the corpus is the
// same on every run (a failure reproduces), its keys have the shape and the
// entropy of real credentials and grant nothing, and no key-shaped literal
// sits in the repository for a secret scanner to flag.
//
//	for _, c := range secretcorpus.Cases() {
//		// put c.Text where c.Where says, run it through a sink, then:
//		if frag, ok := c.Leak(sinkOutput); ok { t.Errorf("%s/%s leaks %q", c.Shape, c.Context, frag) }
//	}
package secretcorpus

import (
	"slices"
	"sync"
)

// Case is one secret shape in one context.
type Case struct {
	// Shape names the kind of secret (Shapes lists them).
	Shape string
	// Context names how the text holds it (Contexts lists them).
	Context Context
	// Where says where a test puts Text in a tool's output.
	Where Where
	// Text is the string a tool returns: a string value of its output, a
	// map key or its typed error's message, as Where says.
	Text string
	// Secrets are the values that must not leak, raw (decoded): one, or two
	// for a pair (an AWS access key id and its secret access key).
	Secrets []string
	// Forms are the substrings of Text that hold a secret, each as it
	// stands there: a secret raw, JSON-escaped, percent-encoded, XML- or
	// CSV-escaped, or the whole base64 token (or the lines of a wrapped
	// base64 body) that holds it. Replacing every Form leaves no secret in
	// Text in any encoding.
	Forms []string
}

// Where says where a Case's Text sits in a tool's output.
type Where int

const (
	// InValue is a string value of the output.
	InValue Where = iota
	// AsMapKey is the key of a member of an object of the output.
	AsMapKey
	// AsError is the message of the tool's typed error
	// (guard.NewError(code, message)).
	AsError
)

// String names w.
func (w Where) String() string {
	switch w {
	case InValue:
		return "value"
	case AsMapKey:
		return "map key"
	case AsError:
		return "error message"
	}
	return "unknown"
}

var corpus = sync.OnceValue(build)

// Cases returns every shape in every context: len(Shapes()) ×
// len(Contexts()) cases, in that order, the same on every call.
func Cases() []Case {
	cs := corpus()
	out := make([]Case, len(cs))
	for i, c := range cs {
		c.Secrets, c.Forms = slices.Clone(c.Secrets), slices.Clone(c.Forms)
		out[i] = c
	}
	return out
}

// Shapes returns the names of the secret shapes, in the order Cases uses.
func Shapes() []string {
	out := make([]string, 0, len(shapeMakers))
	for _, m := range shapeMakers {
		out = append(out, m.name)
	}
	return out
}

func build() []Case {
	g := newGen(40)
	var out []Case
	for i, m := range shapeMakers {
		s := m.make(g)
		s.name, s.index = m.name, i
		for _, ctx := range contexts {
			out = append(out, s.render(ctx))
		}
	}
	return out
}
