package guardtest

// Names the package keeps to itself, for its external tests.

// CallTimeout is callTimeout, for the tests.
const CallTimeout = callTimeout

// TestNames is testNames, for the tests.
var TestNames = testNames
