package idem

// For the external tests: they rewrite a stored record as a writer other
// than the scripts would.
var (
	DecodeFields = decodeFields
	PackFields   = packFields
)

// BudgetKeys names a tenant's budget hash and its due set.
var BudgetKeys = budgetKeys

// MetricStoreRefusals is metricStoreRefusals, for the tests.
const MetricStoreRefusals = metricStoreRefusals
