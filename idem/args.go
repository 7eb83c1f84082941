package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// scriptArgs are a script's arguments, in order: lua/prelude.lua names each
// position the same way (FP, CODE, …). One layout serves all scripts, so
// the prelude reads them once. They go as one argument, packed (argv):
// Redis turns each argument of a call into a Lua string, at a cost of its
// own, and the prelude unpacks them in C. The first four are a binding of
// the call's own outcome as the scripts store it (bind), so that they
// store the arguments' start instead of packing those fields again. TestArgsLayout
// (args_layout_test.go) fails when this struct, argv and the prelude drift.
type scriptArgs struct {
	fingerprint string // 1  FP, as stored (storedFP)
	code        string // 2  CODE: the outcome the guard computed
	data        string // 3  DATA
	message     string // 4  MSG
	now         int64  // 5  NOW: the guard's clock, ms (a number)
	callID      string // 6  CALL: '' when there is none
	key         string // 7  KEY: the effective idempotency key, '' when none
	opID        string // 8  OP
	tool        string // 9  TOOL
	retryMS     string // 10 RETRY
	side        string // 11 SIDE: yes, no or unknown
	body        string // 12 BODY: the audit body, as stored (encodeBody)
	bodySum     string // 13 BODYSUM: its hex SHA-256
	token       string // 14 TOKEN: the reservation token as stored (storedToken), '' when none
	leaseMS     int64  // 15 LEASE (a number)
	ttlMS       string // 16 TTL
	auditTTLMS  string // 17 AUDIT_TTL: '0' keeps audit logs
	receipt     string // 18 RECEIPT: 'found', 'absent' or ''
	reservation string // 19 RESERVATION: the record a reserve stores (reservationRecord), '' elsewhere
	grantMS     string // 20 GRANT_MS: how long a spent grant's marker (K[7]) is kept, ms; '' without one
	fence       string // 21 FENCE: '1' has the script read the server's maxmemory-policy first (evicted.go)
	charge      string // 22 CHARGE: a budget charge to take (packCharge), '' when none
	budget      string // 23 BUDGET: '1' when the last two keys are the tenant's budget keys (budgetKeys)
	gap         string // 24 GAP: '1' has a reserve of a key without a record answer MAYBELOST (evicted.go)
}

// argv returns the arguments as the scripts take them: one, packed, the
// numbers as MessagePack integers (the scripts read them as numbers, with
// no parsing).
func (a *scriptArgs) argv() []any {
	n := 24*5 + 2*9 + len(a.fingerprint) + len(a.code) + len(a.data) + len(a.message) + len(a.callID) + len(a.key) +
		len(a.opID) + len(a.tool) + len(a.retryMS) + len(a.side) + len(a.body) + len(a.bodySum) + len(a.token) +
		len(a.ttlMS) + len(a.auditTTLMS) + len(a.receipt) + len(a.reservation) + len(a.grantMS) + len(a.fence) +
		len(a.charge) + len(a.budget) + len(a.gap)
	b := make([]byte, 0, n)
	b = appendFields(b, a.fingerprint, a.code, a.data, a.message)
	b = appendInt(b, a.now)
	b = appendFields(b, a.callID, a.key, a.opID, a.tool, a.retryMS, a.side, a.body, a.bodySum, a.token)
	b = appendInt(b, a.leaseMS)
	b = appendFields(b, a.ttlMS, a.auditTTLMS, a.receipt, a.reservation, a.grantMS, a.fence, a.charge, a.budget, a.gap)
	return []any{b}
}

// reservationRecord is the record a reserve stores, packed as the scripts pack
// a record (lua/prelude.lua, R): fp, state P, no data or message, op, the
// lease's end, token, tool, key and call.
func (a *scriptArgs) reservationRecord() string {
	return string(packFields(a.fingerprint, "P", "", "", a.opID, strconv.FormatInt(a.now+a.leaseMS, 10), a.token,
		a.tool, a.key, a.callID))
}

// sent is the answer the scripts give as SENT (lua/prelude.lua, answer):
// the outcome the arguments carry, fresh.
func (a *scriptArgs) sent() []string {
	return []string{"R", a.code, string(guard.DeliveryFresh), a.data, a.message, a.retryMS, ""}
}

var receipts = [...]string{guard.ReceiptInconclusive: "", guard.ReceiptFound: "found", guard.ReceiptAbsent: "absent"}

// codeName is the code's wire name, "" for none (a settle's entry).
func codeName(c guard.Code) string {
	if !c.Valid() {
		return ""
	}
	return c.String()
}

func msString(d time.Duration) string {
	return strconv.FormatInt(ms(d), 10)
}

// ms is d in whole milliseconds: 0 for none, at least 1 for any other.
func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d, time.Millisecond).Milliseconds()
}

// args builds the keys and the arguments (scriptArgs, which argv packs)
// for the entry. callID is the call whose
// binding KEYS[1] names (a status query's settle names the original call's);
// receipt is what a settle's receipt lookup said (ReceiptInconclusive
// elsewhere).
func (s *Store) args(e *guard.Entry, callID string, lease time.Duration, receipt guard.Receipt) ([]string, *scriptArgs) {
	k := makeKeys(s.prefix, e.TenantID, e.SubjectID, callID, e.IdempotencyKey, e.OperationID)
	if callID != "" && callID == e.OperationID {
		// The operation is named after its call: it has no index (the
		// binding is one), and a key the script never touches is not
		// named. During a slot migration a key named but missing on the
		// importing node would make the call TRYAGAIN.
		k.op = k.call
	}
	bodySum := sha256.Sum256(e.AuditBody)
	a := &scriptArgs{
		fingerprint: storedFP(e.Fingerprint),
		now:         e.Now.UnixMilli(),
		callID:      callID,
		key:         e.IdempotencyKey,
		opID:        e.OperationID,
		tool:        e.Tool,
		code:        codeName(e.Code),
		data:        string(e.Data),
		message:     e.Message,
		retryMS:     msString(e.RetryAfter),
		side:        string(e.SideEffect),
		body:        encodeBody(e.AuditBody),
		bodySum:     hex.EncodeToString(bodySum[:]),
		token:       storedToken(e.Token),
		leaseMS:     ms(lease),
		ttlMS:       s.ttlMS,
		auditTTLMS:  s.auditTTLMS,
		fence:       s.fenceArg(),
	}
	if int(receipt) < len(receipts) {
		a.receipt = receipts[receipt]
	}
	return k.list(), a
}

// spendsGrant adds K[7], the marker of the grant that approved the entry's
// write, to a reserve's keys, with how long the marker is kept: a reserve
// spends the grant.
func (s *Store) spendsGrant(keys []string, a *scriptArgs, e *guard.Entry) []string {
	if e.GrantID == "" {
		return keys
	}
	a.grantMS = strconv.FormatInt(max(e.GrantExpiresAt.Add(guard.GrantSkew).Sub(e.Now).Milliseconds(), 1), 10)
	return append(keys, grantKey(s.prefix, e.TenantID, e.SubjectID, e.GrantID))
}

// returnsGrant adds K[7] to a commit's keys when the commit may release the
// reservation (a not-started code) and so give the grant back; a commit of
// OK or OUTCOME_UNKNOWN keeps it spent and names no marker.
func (s *Store) returnsGrant(keys []string, e *guard.Entry) []string {
	if e.GrantID == "" || e.Code == guard.CodeOK || e.Code == guard.CodeOutcomeUnknown {
		return keys
	}
	return append(keys, grantKey(s.prefix, e.TenantID, e.SubjectID, e.GrantID))
}
