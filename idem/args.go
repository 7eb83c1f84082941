package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/toolguard/toolguard/guard"
)

// scriptArgs is ARGV of every script, in order: lua/prelude.lua names each
// position the same way (FP, NOW, CALL, …). One layout serves all scripts,
// so the prelude reads them once.
type scriptArgs struct {
	fingerprint string // ARGV[1]  FP, as stored (storedFP)
	now         string // ARGV[2]  NOW: the guard's clock, ms
	callID      string // ARGV[3]  CALL: '' when there is none
	key         string // ARGV[4]  KEY: the effective idempotency key, '' when none
	opID        string // ARGV[5]  OP
	tool        string // ARGV[6]  TOOL
	code        any    // ARGV[7]  CODE: the outcome the guard computed
	data        string // ARGV[8]  DATA
	message     string // ARGV[9]  MSG
	retryMS     any    // ARGV[10] RETRY
	side        any    // ARGV[11] SIDE: yes, no or unknown
	body        string // ARGV[12] BODY: the audit body, as stored (encodeBody)
	bodySum     string // ARGV[13] BODYSUM: its hex SHA-256
	token       string // ARGV[14] TOKEN: the reservation token as stored (storedToken), '' when none
	leaseMS     any    // ARGV[15] LEASE
	ttlMS       any    // ARGV[16] TTL
	auditTTLMS  any    // ARGV[17] AUDIT_TTL: '0' keeps audit logs
	receipt     any    // ARGV[18] RECEIPT: 'found', 'absent' or ''
}

// list returns the arguments in ARGV order.
func (a *scriptArgs) list() []any {
	return []any{a.fingerprint, a.now, a.callID, a.key, a.opID, a.tool, a.code, a.data, a.message,
		a.retryMS, a.side, a.body, a.bodySum, a.token, a.leaseMS, a.ttlMS, a.auditTTLMS, a.receipt}
}

// Boxed once: a string put in an interface allocates unless it is a
// constant, and every script call passes about twenty.
var (
	boxedZero  any = "0"
	boxedEmpty any = ""
	boxedCodes     = func() map[guard.Code]any {
		m := map[guard.Code]any{0: ""}
		for _, c := range guard.Codes() {
			m[c] = c.String()
		}
		return m
	}()
	boxedSides = map[guard.SideEffect]any{guard.SideEffectNone: string(guard.SideEffectNone),
		guard.SideEffectYes: string(guard.SideEffectYes), guard.SideEffectUnknown: string(guard.SideEffectUnknown)}
	boxedReceipts = [...]any{guard.ReceiptInconclusive: "", guard.ReceiptFound: "found", guard.ReceiptAbsent: "absent"}
)

func boxCode(c guard.Code) any {
	if v, ok := boxedCodes[c]; ok {
		return v
	}
	return ""
}

func boxSide(s guard.SideEffect) any {
	if v, ok := boxedSides[s]; ok {
		return v
	}
	return string(s)
}

func boxMS(d time.Duration) any {
	if d <= 0 {
		return boxedZero
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
		code:        boxCode(e.Code),
		data:        string(e.Data),
		message:     e.Message,
		retryMS:     boxMS(e.RetryAfter),
		side:        boxSide(e.SideEffect),
		body:        encodeBody(e.AuditBody),
		bodySum:     hex.EncodeToString(bodySum[:]),
		token:       storedToken(e.Token),
		leaseMS:     boxMS(lease),
		ttlMS:       s.ttlMS,
		auditTTLMS:  s.auditTTLMS,
		receipt:     boxedEmpty,
	}
	if int(receipt) < len(boxedReceipts) {
		a.receipt = boxedReceipts[receipt]
	}
	return k.list(), a.list()
}
