package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// scriptArgs are a script's arguments, in order: lua/prelude.lua names each
// position the same way (FP, NOW, CALL, …). One layout serves all scripts,
// so the prelude reads them once. They go as one argument, packed
// (argv): Redis turns each argument of a call into a Lua string, at a
// cost of its own, and the prelude unpacks them in C.
type scriptArgs struct {
	fingerprint string // 1  FP, as stored (storedFP)
	now         string // 2  NOW: the guard's clock, ms
	callID      string // 3  CALL: '' when there is none
	key         string // 4  KEY: the effective idempotency key, '' when none
	opID        string // 5  OP
	tool        string // 6  TOOL
	code        string // 7  CODE: the outcome the guard computed
	data        string // 8  DATA
	message     string // 9  MSG
	retryMS     string // 10 RETRY
	side        string // 11 SIDE: yes, no or unknown
	body        string // 12 BODY: the audit body, as stored (encodeBody)
	bodySum     string // 13 BODYSUM: its hex SHA-256
	token       string // 14 TOKEN: the reservation token as stored (storedToken), '' when none
	leaseMS     string // 15 LEASE
	ttlMS       string // 16 TTL
	auditTTLMS  string // 17 AUDIT_TTL: '0' keeps audit logs
	receipt     string // 18 RECEIPT: 'found', 'absent' or ''
}

// argv returns the arguments as the scripts take them: one, packed.
func (a *scriptArgs) argv() []any {
	return []any{packFields(a.fingerprint, a.now, a.callID, a.key, a.opID, a.tool, a.code, a.data, a.message,
		a.retryMS, a.side, a.body, a.bodySum, a.token, a.leaseMS, a.ttlMS, a.auditTTLMS, a.receipt)}
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
	if d <= 0 {
		return "0"
	}
	return strconv.FormatInt(max(d, time.Millisecond).Milliseconds(), 10)
}

// args builds KEYS and ARGV for the entry. callID is the call whose
// binding KEYS[1] names (a status query's settle names the original call's);
// receipt is what a settle's receipt lookup said (ReceiptInconclusive
// elsewhere).
func (s *Store) args(e *guard.Entry, callID string, lease time.Duration, receipt guard.Receipt) ([]string, []any) {
	k := makeKeys(s.prefix, e.TenantID, e.SubjectID, callID, e.IdempotencyKey, e.OperationID)
	if callID != "" && callID == e.OperationID {
		// The operation is named after its call: it has no index (the
		// binding is one), and a key the script never touches is not
		// named. During a slot migration a key named but missing on the
		// importing node would make the call TRYAGAIN.
		k.op = k.call
	}
	bodySum := sha256.Sum256(e.AuditBody)
	a := scriptArgs{
		fingerprint: storedFP(e.Fingerprint),
		now:         strconv.FormatInt(e.Now.UnixMilli(), 10),
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
		leaseMS:     msString(lease),
		ttlMS:       s.ttlMS,
		auditTTLMS:  s.auditTTLMS,
	}
	if int(receipt) < len(receipts) {
		a.receipt = receipts[receipt]
	}
	return k.list(), a.argv()
}
