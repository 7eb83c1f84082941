package tggenkit

// The names every call carried through Genkit has in its execution context
// and audit record.
const (
	// Provider names Genkit as the provider of the call.
	Provider = "genkit"
	// APIFamily names the path the call took: Genkit's tool loop.
	APIFamily = "genkit-tools"
	// AdapterRevision names this package's revision, for the audit.
	AdapterRevision = "genkit-go-v1.12-tggenkit-v1"
	// MiddlewareName is the guard's name as an ai.Middleware.
	MiddlewareName = "toolguard"
)
