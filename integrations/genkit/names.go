package tggenkit

// The names every call carried through Genkit has in its execution context
// and audit record.
const (
	// provider names Genkit as the provider of the call.
	provider = "genkit"
	// apiFamily names the path the call took: Genkit's tool loop.
	apiFamily = "genkit-tools"
	// adapterRevision names this package's revision, for the audit.
	adapterRevision = "genkit-go-v1.12-tggenkit-v1"
	// middlewareName is the guard's name as an ai.Middleware.
	middlewareName = "toolguard"
)
