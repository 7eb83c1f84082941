package tgeino

// The names every call carried through Eino has in its execution context
// and audit record.
const (
	// Provider names Eino as the provider of the call.
	Provider = "eino"
	// APIFamily names the path the call took: Eino's tool execution.
	APIFamily = "eino-tools"
	// AdapterRevision names this package's revision, for the audit.
	AdapterRevision = "eino-v0.9-tgeino-v1"
)
