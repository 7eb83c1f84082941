package tgtemporal

// The defaults the tests compare with; the package keeps them to itself.
var (
	DefaultApprovalTimeout = defaultApprovalTimeout
	DefaultDispatchOptions = defaultDispatchOptions
	DefaultNotifyOptions   = defaultNotifyOptions
)
