package tgmcp

// Names the package keeps to itself, for its external tests.

// CodeKeyConflict is codeKeyConflict, for the tests.
const CodeKeyConflict = codeKeyConflict

// CodeKeyInProgress is codeKeyInProgress, for the tests.
const CodeKeyInProgress = codeKeyInProgress

// IdempotencyCapability is idempotencyCapability, for the tests.
const IdempotencyCapability = idempotencyCapability

// KeyConflict is keyConflict, for the tests.
const KeyConflict = keyConflict

// KeyInProgress is keyInProgress, for the tests.
const KeyInProgress = keyInProgress

// MetaScope is metaScope, for the tests.
const MetaScope = metaScope

// TasksExtension is tasksExtension, for the tests.
const TasksExtension = tasksExtension

// WellKnownPath is wellKnownPath, for the tests.
const WellKnownPath = wellKnownPath
