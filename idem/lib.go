package idem

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The store's Lua as one Redis Function library (Redis 7.0 and later): the
// prelude once, then each script's body as a function of the library,
// registered as "<library>_<script>". Its prelude runs once, when the
// library is loaded, instead of before every call as with EVALSHA. The
// library's name carries a hash of its text, so each version of the store
// loads a library of its own beside the others (a rolling deploy runs two
// at once) and never replaces another version's.

// libraryBase starts every library name: toolguard_<12 hex digits>.
const libraryBase = "toolguard"

// library is the text FUNCTION LOAD takes and the names FCALL calls.
type library struct {
	name string             // libraryBase_<the first 12 hex digits of the SHA-1 of its text>
	code string             // the text to load: "#!lua name=<name>", the prelude, the functions
	fns  map[*script]string // each script's function: <name>_<script's name>
}

// lib is the library of the store's scripts.
var lib = newLibrary(prelude, allScripts)

// newLibrary assembles the library of the scripts on the prelude. Its name
// hashes the text as assembled under the bare base name, so it changes
// whenever the prelude, a body, a script's name or the assembly changes.
func newLibrary(prelude string, scripts []*script) *library {
	sum := sha1.Sum([]byte(libraryCode(libraryBase, prelude, scripts)))
	name := libraryBase + "_" + hex.EncodeToString(sum[:6])
	l := &library{name: name, code: libraryCode(name, prelude, scripts), fns: make(map[*script]string, len(scripts))}
	for _, sc := range scripts {
		l.fns[sc] = name + "_" + sc.name
	}
	return l
}

// libraryCode writes the library's text under the name: each body becomes
// a local function, and the registered function runs the prelude's setup
// on the call's keys and arguments before it (the body does not run if
// the setup's fence answered).
func libraryCode(name, prelude string, scripts []*script) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!lua name=%s\n%s\n", name, prelude)
	for _, sc := range scripts {
		fmt.Fprintf(&b, "local function s_%s()\n%s\nend\n", sc.name, sc.body)
		fmt.Fprintf(&b, "redis.register_function('%s_%s', function(keys, args) return setup(keys, args[1]) or s_%s() end)\n",
			name, sc.name, sc.name)
	}
	return b.String()
}

// fn returns the name of the script's function in the library.
func (l *library) fn(sc *script) string { return l.fns[sc] }

// load loads the library on one server. The library already there (its
// name says its text) is success. A server without Redis Functions makes
// the store send scripts from then on, and is success too.
func (s *Store) load(ctx context.Context, c *redis.Client) error {
	err := c.FunctionLoad(ctx, lib.code).Err()
	switch {
	case err == nil || redis.HasErrorPrefix(err, "Library '"+lib.name+"' already exists"):
		return nil
	case noFunctions(err):
		s.scripts.Store(true)
		return nil
	case redis.HasErrorPrefix(err, "NOPERM"):
		return fmt.Errorf("idem: %s refuses FUNCTION LOAD of the store's library %s (%w): "+
			"grant the account FUNCTION LOAD, or set Options.Scripts to send the Lua as scripts", c.Options().Addr, lib.name, err)
	}
	return fmt.Errorf("idem: loading the store's function library %s on %s: %w", lib.name, c.Options().Addr, err)
}

// noFunctions reports an error of a server that has no Redis Functions:
// FUNCTION or FCALL is an unknown command (Redis before 7.0, miniredis).
// A nil error is answered first: redis.HasErrorPrefix allocates.
func noFunctions(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "unknown command") || redis.HasErrorPrefix(err, "unknown subcommand"))
}

// notLoaded reports an FCALL refused because the server has no such
// function: the library is not loaded there (a restart without
// persistence, FUNCTION FLUSH or DELETE, a node that never got it). The
// function did not run, so the call may be sent again.
func notLoaded(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "Function not found")
}
