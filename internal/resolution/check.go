package resolution

import (
	"errors"
	"fmt"

	"github.com/toolguard/toolguard/guard"
)

// NotExecutedMessage is the answer's message for guard.OutcomeNotStarted,
// as the model reads it in a later status query and the operator in
// toolctl's output; both stores answer with it.
const NotExecutedMessage = "An operator established that the operation did not take place: nothing was executed. It may be run again."

// Check refuses a resolution before any record is read: one that names no
// operator, names no record (named: an idempotency key or an operation id
// was given), carries data for a write that did not take place, or gives
// an outcome other than guard.OutcomeCommitted or guard.OutcomeNotStarted.
// store prefixes the error ("idem", "pgstore"), as the store's own errors.
func Check(store, operator string, named bool, outcome guard.Outcome, data []byte) error {
	switch {
	case operator == "":
		return errors.New(store + ": a resolution must name its operator")
	case !named:
		return errors.New(store + ": a resolution must name an idempotency key or an operation id")
	case outcome == guard.OutcomeNotStarted && len(data) > 0:
		return errors.New(store + ": a write that did not take place has no result data")
	case outcome != guard.OutcomeCommitted && outcome != guard.OutcomeNotStarted:
		return fmt.Errorf("%s: unknown outcome %q (want %q or %q)", store, outcome, guard.OutcomeCommitted, guard.OutcomeNotStarted)
	}
	return nil
}
