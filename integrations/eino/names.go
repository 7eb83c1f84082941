package tgeino

// The names every call carried through Eino has in its execution context
// and audit record.
const (
	// provider names Eino as the provider of the call.
	provider = "eino"
	// apiFamily names the path the call took: Eino's tool execution.
	apiFamily = "eino-tools"
	// adapterRevision names this package's revision, for the audit.
	adapterRevision = "eino-v0.9-tgeino-v1"
)
