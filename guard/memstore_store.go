package guard

import (
	"errors"
	"sync"
	"time"
)

// MemStoreOptions configure a MemStore. The zero value means the defaults.
type MemStoreOptions struct {
	// TTL, when above zero, forgets a call binding, an idempotency record
	// or an operation index entry that long after its last change,
	// measured on the guard's clock (Entry.Now), like idem's Redis TTLs.
	// The default, zero, keeps them for the life of the MemStore. Audit logs
	// are always kept.
	TTL time.Duration
}

// MemStore implements Store and Budgeter in memory: the reference store.
// It behaves as package idem's Redis store does (its Lua scripts are the
// reference semantics), in a few hundred lines of plain Go under one
// mutex, so that it serves tests, examples and single-process programs,
// and shows third-party store authors what a store must do: it keeps each
// of Store's numbered rules, and its code cites them as "rule N".
//
// It is safe for concurrent use: one mutex makes every method atomic. Its
// state dies with the process. Retention: by default it keeps everything
// for the life of the MemStore, tombstones included (idem keeps a
// tombstone for a minute, which is all rule 12 needs); MemStoreOptions.TTL
// forgets bindings, records and index entries that long after their last
// change, on the guard's clock.
type MemStore struct {
	ttlMS int64 // MemStoreOptions.TTL in ms; 0 keeps everything

	mu        sync.Mutex
	calls     map[scope]*binding          // call-id bindings (rule 2)
	records   map[scope]*record           // idempotency records (rule 3)
	index     map[scope]ref               // operation index (rule 4)
	commits   map[scope]*expiring[reply]  // applied commits by token (rule 14)
	grants    map[scope]*expiring[string] // spent grants: the effective key of the operation each paid for (rule 22)
	logs      map[string]*auditLog        // audit logs by tenant (rule 5)
	budget    budgets                     // budget counters (budget.go)
	nextSweep int64
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore(opts MemStoreOptions) *MemStore {
	s := &MemStore{
		calls:   map[scope]*binding{},
		records: map[scope]*record{},
		index:   map[scope]ref{},
		commits: map[scope]*expiring[reply]{},
		grants:  map[scope]*expiring[string]{},
		logs:    map[string]*auditLog{},
	}
	if opts.TTL > 0 {
		s.ttlMS = ms(opts.TTL)
	}
	return s
}

// scope names one binding, record, index entry or commit: ids are compared
// as they are, so no id can reach into another tenant or subject.
type scope struct{ tenant, subject, id string }

// binding is a call id's binding (rule 2).
type binding struct {
	fp     string
	code   Code // the terminal result, 0 when none is stored
	data   string
	msg    string
	linked bool   // the call reserved an idempotency record …
	link   string // … under this effective key
	until  int64
}

// replay is the binding's stored result, answered again (rule 6).
func (b *binding) replay() reply {
	return reply{code: b.code, delivery: DeliveryLocalReplay, data: b.data, msg: b.msg}
}

// The states of an idempotency record (rule 3).
const (
	reserved  = 'P'
	committed = 'C'
	unknown   = 'U'
	released  = 'X'
)

// record is an idempotency record (rule 3). A released record (a
// tombstone) keeps only its state and token.
type record struct {
	state   byte
	fp      string
	data    string // committed output
	msg     string
	op      string // the operation id it ran under
	leaseMS int64  // a reservation's end, ms; 0 when never reserved
	token   string // the reservation's token
	tool    string
	key     string // the effective key, as the entry gave it
	call    string // the call id it ran under
	until   int64
}

// live reports whether the record holds its key: a tombstone does not.
func (r *record) live() bool { return r != nil && r.state != released }

// ref is what an operation index entry names: an idempotency record (by
// effective key) or a call binding (by call id), in the same scope; or, as
// never, that nothing of the operation ran.
type ref struct {
	call  bool
	never bool // nothing of the operation ran: it names nothing
	id    string
	until int64
}

// expiring is a value with an expiry, for the commit memo.
type expiring[T any] struct {
	v     T
	until int64
}

// ms converts a duration to the milliseconds idem's scripts compute with:
// 0 for none, at least 1 for any positive duration.
func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d, time.Millisecond).Milliseconds()
}

// expiry returns when something changed at nowMS expires; 0 is never.
func (s *MemStore) expiry(nowMS int64) int64 {
	if s.ttlMS == 0 {
		return 0
	}
	return nowMS + s.ttlMS
}

func expired(until, nowMS int64) bool { return until != 0 && until <= nowMS }

// sweep forgets what has expired, at most once per TTL of the guard's
// clock. Lookups also ignore expired entries, so this only frees memory.
func (s *MemStore) sweep(nowMS int64) {
	if s.ttlMS == 0 || nowMS < s.nextSweep {
		return
	}
	s.nextSweep = nowMS + s.ttlMS
	forget(s.calls, func(b *binding) int64 { return b.until }, nowMS)
	forget(s.records, func(r *record) int64 { return r.until }, nowMS)
	forget(s.index, func(r ref) int64 { return r.until }, nowMS)
	forget(s.commits, func(c *expiring[reply]) int64 { return c.until }, nowMS)
	forget(s.grants, func(g *expiring[string]) int64 { return g.until }, nowMS)
	s.forgetBudgets(nowMS)
}

// forget deletes the entries of m that expired by nowMS.
func forget[V any](m map[scope]V, until func(V) int64, nowMS int64) {
	for k, v := range m {
		if expired(until(v), nowMS) {
			delete(m, k)
		}
	}
}

var (
	errNoToken = errors.New("memstore: a write's entry has no reservation token")
	errBadCode = errors.New("memstore: the entry's code is not a valid result code")
)
