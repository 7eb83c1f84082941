package idem

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The store's Lua: a prelude shared by every script (lua/prelude.lua) and
// one body per state change. A body is the inside of a function that runs
// after the prelude's setup has read the call's keys and arguments, so the
// same text serves both ways the store sends it: as a script (EVALSHA:
// prelude, body, and a call of it) and as a Redis Function library, whose
// prelude runs once when it is loaded (lib.go). The body runs unless the
// setup's fence answered first.

var (
	//go:embed lua/prelude.lua
	prelude string
	//go:embed lua/finish.lua
	finishSrc string
	//go:embed lua/reserve.lua
	reserveSrc string
	//go:embed lua/commit.lua
	commitSrc string
	//go:embed lua/status.lua
	statusSrc string
	//go:embed lua/settle.lua
	settleSrc string
	//go:embed lua/resolve.lua
	resolveSrc string
	//go:embed lua/charge.lua
	chargeSrc string
	//go:embed lua/refund.lua
	refundSrc string
)

// script is one of the store's state changes.
type script struct {
	name string // its function's name in the library, after the library's
	body string
	eval *redis.Script // prelude, body and a call of it
}

func newScript(name, body string) *script {
	return &script{name: name, body: body,
		eval: redis.NewScript(prelude + "\nlocal function main()\n" + body + "\nend\nreturn setup(KEYS, ARGV[1]) or main()\n")}
}

var (
	finishScript  = newScript("finish", finishSrc)
	reserveScript = newScript("reserve", reserveSrc)
	commitScript  = newScript("commit", commitSrc)
	statusScript  = newScript("status", statusSrc)
	settleScript  = newScript("settle", settleSrc)
	resolveScript = newScript("resolve", resolveSrc)
	chargeScript  = newScript("charge", chargeSrc)
	refundScript  = newScript("refund", refundSrc)

	allScripts = []*script{finishScript, reserveScript, commitScript, statusScript, settleScript, resolveScript,
		chargeScript, refundScript}
)
