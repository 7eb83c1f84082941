package observe

// Names the package keeps to itself, for its external tests.

// InstrumentationName is instrumentationName, for the tests.
var InstrumentationName = instrumentationName

// KeyAction is keyAction, for the tests.
var KeyAction = keyAction

// KeyCode is keyCode, for the tests.
var KeyCode = keyCode

// KeyDecision is keyDecision, for the tests.
var KeyDecision = keyDecision

// KeyDelivery is keyDelivery, for the tests.
var KeyDelivery = keyDelivery

// KeyEffect is keyEffect, for the tests.
var KeyEffect = keyEffect

// KeyErrorType is keyErrorType, for the tests.
var KeyErrorType = keyErrorType

// KeyHostError is keyHostError, for the tests.
var KeyHostError = keyHostError

// KeyOperationID is keyOperationID, for the tests.
var KeyOperationID = keyOperationID

// KeyOperationName is keyOperationName, for the tests.
var KeyOperationName = keyOperationName

// KeyOutcome is keyOutcome, for the tests.
var KeyOutcome = keyOutcome

// KeyRecovery is keyRecovery, for the tests.
var KeyRecovery = keyRecovery

// KeyReplayed is keyReplayed, for the tests.
var KeyReplayed = keyReplayed

// KeyRetryAfterMS is keyRetryAfterMS, for the tests.
var KeyRetryAfterMS = keyRetryAfterMS

// KeyStatus is keyStatus, for the tests.
var KeyStatus = keyStatus

// KeyToolCallID is keyToolCallID, for the tests.
var KeyToolCallID = keyToolCallID

// KeyToolName is keyToolName, for the tests.
var KeyToolName = keyToolName

// KeyToolType is keyToolType, for the tests.
var KeyToolType = keyToolType

// LogDispatch is logDispatch, for the tests.
var LogDispatch = logDispatch

// LogStatus is logStatus, for the tests.
var LogStatus = logStatus

// MetricConflicts is metricConflicts, for the tests.
var MetricConflicts = metricConflicts

// MetricDispatchDuration is metricDispatchDuration, for the tests.
var MetricDispatchDuration = metricDispatchDuration

// MetricDispatches is metricDispatches, for the tests.
var MetricDispatches = metricDispatches

// MetricHostErrors is metricHostErrors, for the tests.
var MetricHostErrors = metricHostErrors

// MetricReplays is metricReplays, for the tests.
var MetricReplays = metricReplays

// MetricSideEffects is metricSideEffects, for the tests.
var MetricSideEffects = metricSideEffects

// MetricStatusQueries is metricStatusQueries, for the tests.
var MetricStatusQueries = metricStatusQueries

// MetricStatusQueryDuration is metricStatusQueryDuration, for the tests.
var MetricStatusQueryDuration = metricStatusQueryDuration

// MetricUnknownOutcomes is metricUnknownOutcomes, for the tests.
var MetricUnknownOutcomes = metricUnknownOutcomes

// MetricUnknownPending is metricUnknownPending, for the tests.
var MetricUnknownPending = metricUnknownPending
