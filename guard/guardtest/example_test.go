package guardtest_test

import (
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
)

// Example is how a third-party store runs the conformance suite, as
// testing/slogtest is run for a slog.Handler: one test function that hands
// TestStore a constructor of fresh, empty stores. It needs a *testing.T, so
// it is compiled here and not run; guard.TestConformance (the MemStore), idem's and
// pgstore's TestConformance run it on every store of this module.
func Example() {
	_ = func(t *testing.T) { // func TestMyStore(t *testing.T) in your store's package
		guardtest.TestStore(t, func(t *testing.T) guard.AuditStore {
			return guard.NewMemStore(guard.MemStoreOptions{}) // your store, empty, cleaned up with t.Cleanup
		})
	}
}
