// Command toolaudit prints a tenant's tool-audit-v2 records from the Redis
// store or the Postgres store as JSON lines, and verifies their hash chain.
//
//	go run ./cmd/toolaudit [-store URL|ADDRS] [-prefix P | -schema S] -tenant T [-verify] [-anchor FILE] [-format flat|raw] [-after N [-prev HASH]]
//	go run ./cmd/toolaudit -file EXPORT.jsonl -tenant T [-verify] [-after N [-prev HASH]]
//	go run ./cmd/toolaudit [-prefix P] -tenant T -keys
//
// -store (or its older name -redis) is a redis:// URL (default
// redis://127.0.0.1:6379/0) or a comma-separated host:port list for a
// Redis Cluster, with -prefix the store's key prefix (idem.Options.Prefix,
// default "tg:"); or a postgres:// URL, with -schema the store's schema
// (pgstore.Options.Schema, default "toolguard"). Records are
// printed oldest first, one JSON object a line: -format flat (the default)
// is guard.AuditRecord's flat tool-audit-v2 object, for reading and jq;
// -format raw keeps the record as stored — the body's exact bytes as a JSON
// string, code, delivery, side effect, prev hash and hash — so that an
// export can be verified again later: -file reads such an export instead of
// Redis.
//
// With -verify the chain is checked as guard.VerifyAudit does — sequence
// numbers without gaps, each prev hash equal to the previous record's hash,
// each hash recomputed from its record, the last record equal to the head —
// and, beyond it, that every record is the tenant's. toolaudit exits 1
// naming the first bad record. -after N starts after record N, for an
// incremental export or a log trimmed up to N; -prev gives record N's hash
// (from the previous export) so that the first record is checked against it
// too. Without -prev, a log that starts after N is trusted to link to
// whatever record N was. A file has no head: its last record is reported,
// to be compared with the anchor kept when it was exported.
//
// -anchor FILE (implies -verify) keeps the verified head outside Redis:
// after a successful verification the file holds the tenant, the last
// record's sequence number and its hash. The next verification with the
// same file fails (exit 1) when the chain no longer reaches that record —
// it restarted (a Redis restart without persistence, a failover to a
// replica that had not received the tail) or lost its tail — or when the
// record at the anchor's sequence number has another hash (the chain was
// restarted and grew past it, or was rewritten). With -after equal to the
// anchor's sequence number and no -prev, the anchor's hash is the link
// checked. A missing file is created; a file of another tenant is refused.
//
// -keys prints the names of the tenant's audit stream and chain head, for
// redis-cli (see docs/operations.md, retention), and exits.
//
// Exit status: 0 success, 1 a broken chain (or a record that cannot be
// read), 2 a usage or connection error.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/pgopen"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/pgstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// page is how many records one read fetches.
const page = 1000

const usage = `usage: toolaudit [-store URL|ADDRS] [-prefix P | -schema S] -tenant T [-verify] [-anchor FILE] [-format flat|raw] [-after N [-prev HASH]]
       toolaudit -file EXPORT.jsonl -tenant T [-verify] [-after N [-prev HASH]]
       toolaudit [-prefix P] -tenant T -keys`

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolaudit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeAddr := fs.String("store", "redis://127.0.0.1:6379/0", "the store's server: a redis:// URL, a comma-separated host:port list for a Redis Cluster, or a postgres:// URL")
	fs.StringVar(storeAddr, "redis", "redis://127.0.0.1:6379/0", "the same as -store (its older name)")
	prefix := fs.String("prefix", "tg:", "Redis: the store's key prefix (idem.Options.Prefix)")
	schema := fs.String("schema", "toolguard", "Postgres: the store's schema (pgstore.Options.Schema)")
	tenant := fs.String("tenant", "", "the tenant id whose audit log to print (required)")
	verify := fs.Bool("verify", false, "verify the hash chain; exit 1 at the first bad record")
	format := fs.String("format", "flat", "flat (tool-audit-v2 objects) or raw (as stored, verifiable again with -file)")
	file := fs.String("file", "", "read a -format raw export from this file (- for standard input) instead of Redis")
	after := fs.Int64("after", 0, "start after this sequence number (incremental export, or a trimmed log)")
	prev := fs.String("prev", "", "with -after: the hash of record -after, to check the first record's link")
	anchorPath := fs.String("anchor", "", "verify against, and then advance, the head kept in this file (implies -verify)")
	keys := fs.Bool("keys", false, "print the tenant's audit stream and head key names, and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(msg string) int {
		fmt.Fprintln(stderr, "toolaudit: "+msg)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return fail(fmt.Sprintf("unexpected arguments %q", fs.Args()))
	case *tenant == "":
		fs.Usage()
		return fail("-tenant is required")
	case *after < 0:
		return fail("-after must not be negative")
	case *prev != "" && *after == 0:
		return fail("-prev needs -after (record 1 has no previous hash)")
	case *format != "flat" && *format != "raw":
		return fail("-format is flat or raw")
	case *anchorPath != "" && *file != "":
		return fail("-anchor guards the log in Redis; verify a file export with -after and -prev")
	}
	var anc *anchor
	if *anchorPath != "" {
		*verify = true
		var err error
		if anc, err = readAnchor(*anchorPath, *tenant); err != nil {
			return fail("-anchor: " + err.Error())
		}
		if anc != nil && anc.Seq == *after && *after > 0 {
			if *prev == "" {
				*prev = anc.Hash
			} else if *prev != anc.Hash {
				return fail(fmt.Sprintf("-prev %s disagrees with the anchor's hash %s of record %d", *prev, anc.Hash, anc.Seq))
			}
		}
	}

	if *keys {
		s, err := idem.New(nil, idem.Options{Prefix: *prefix})
		if err != nil {
			return fail("-prefix: " + err.Error())
		}
		stream, head := s.AuditKeys(*tenant)
		fmt.Fprintf(stdout, "stream %s\nhead %s\n", stream, head)
		return 0
	}

	var src source
	if *file != "" {
		r := io.Reader(os.Stdin)
		if *file != "-" {
			f, err := os.Open(*file)
			if err != nil {
				return fail("-file: " + err.Error())
			}
			defer f.Close()
			r = f
		}
		src = newFileSource(r)
	} else if pgopen.Is(*storeAddr) {
		pool, err := pgopen.Open(*storeAddr, 1)
		if err != nil {
			return fail("-store: " + err.Error())
		}
		defer pool.Close()
		store, err := pgstore.New(context.Background(), pool, pgstore.Options{Schema: *schema, SweepEvery: -1})
		if err != nil {
			return fail("-schema: " + err.Error())
		}
		src = store
	} else {
		rdb, err := redisconn.Open(*storeAddr, 0)
		if err != nil {
			return fail("-store: " + err.Error())
		}
		defer rdb.Close()
		store, err := idem.New(rdb, idem.Options{Prefix: *prefix})
		if err != nil {
			return fail("-prefix: " + err.Error())
		}
		src = store
	}

	c := chain{tenant: *tenant, seq: *after, prev: *prev, anchored: *after == 0 || *prev != ""}
	if anc != nil {
		c.watch = anc.Seq
	}
	trusted := !c.anchored
	n, err := export(context.Background(), src, &c, stdout, *verify, *format == "raw")
	var ce *guard.AuditChainError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "toolaudit: tenant %q: chain broken at record %d: %s\n", *tenant, ce.Seq, ce.Reason)
		return 1
	case errors.Is(err, errUnreadable):
		fmt.Fprintf(stderr, "toolaudit: tenant %q: %v\n", *tenant, err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "toolaudit: reading the audit log: %v\n", err)
		return 2
	}
	if anc != nil {
		if msg := anc.lost(&c, *after); msg != "" {
			fmt.Fprintf(stderr, "toolaudit: tenant %q: %s (anchor %s)\n", *tenant, msg, *anchorPath)
			return 1
		}
	}
	if *verify {
		from := "record 1"
		if *after > 0 {
			from = fmt.Sprintf("record %d", *after+1)
			if trusted {
				from += fmt.Sprintf(" (its link to record %d unchecked: pass -prev)", *after)
			}
		}
		to := "the head"
		if *file != "" {
			to = "the end of the file"
		}
		fmt.Fprintf(stderr, "toolaudit: tenant %q: %d records verified from %s to %s (seq %d, hash %s)\n",
			*tenant, n, from, to, c.seq, c.prev)
	}
	if *anchorPath != "" {
		if err := writeAnchor(*anchorPath, anchor{Tenant: *tenant, Seq: c.seq, Hash: c.prev}); err != nil {
			fmt.Fprintf(stderr, "toolaudit: -anchor: %v\n", err)
			return 2
		}
		was := "new"
		if anc != nil {
			was = fmt.Sprintf("was record %d", anc.Seq)
		}
		fmt.Fprintf(stderr, "toolaudit: tenant %q: anchor %s now at record %d (%s)\n", *tenant, *anchorPath, c.seq, was)
	}
	return 0
}

// source is where records come from: the Redis store (idem.Store) or a raw
// export.
type source interface {
	Audit(ctx context.Context, tenantID string, after int64, limit int) ([]guard.AuditRecord, guard.AuditHead, error)
}

var errUnreadable = errors.New("record cannot be read")

// chain is the state of verification: the tenant and the last record seen.
type chain struct {
	tenant   string
	seq      int64
	prev     string
	anchored bool // prev is known (from record 0 or -prev); else the first record's is taken
	// watch is the anchor's sequence number, and watched the hash the
	// record with that number had, if it was read.
	watch   int64
	watched string
}

// export prints the records after c.seq and, with verify, checks them as
// guard.VerifyAudit does (from c instead of from the start).
func export(ctx context.Context, src source, c *chain, w io.Writer, verify, raw bool) (int64, error) {
	var (
		n    int64
		head guard.AuditHead
	)
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	for {
		recs, h, err := src.Audit(ctx, c.tenant, c.seq, page)
		if err != nil {
			return n, err
		}
		head = h
		for _, r := range recs {
			if verify {
				if err := check(c, r); err != nil {
					return n, err
				}
			}
			var line []byte
			if raw {
				line, err = json.Marshal(toRaw(r))
			} else {
				line, err = json.Marshal(r)
			}
			if err != nil {
				return n, fmt.Errorf("%w: record %d: %v", errUnreadable, r.Seq, err)
			}
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				return n, err
			}
			c.seq, c.prev = r.Seq, r.Hash
			if r.Seq == c.watch {
				c.watched = r.Hash
			}
			n++
		}
		if len(recs) == 0 {
			break
		}
	}
	if verify && (head.Seq != c.seq || (c.anchored && head.Hash != c.prev)) {
		return n, &guard.AuditChainError{Seq: c.seq + 1, Reason: fmt.Sprintf("head is record %d, log ends at %d (a tail was dropped or the head edited)", head.Seq, c.seq)}
	}
	if !c.anchored {
		c.prev = head.Hash // nothing after -after: the head is the anchor
	}
	return n, bw.Flush()
}

// check checks one record against the chain, and that it is the tenant's:
// a chain copied whole from another tenant links up by itself.
func check(c *chain, r guard.AuditRecord) error {
	prev := c.prev
	if !c.anchored {
		prev = r.PrevHash
		c.anchored = true
	}
	if err := r.Check(c.seq+1, prev); err != nil {
		return err
	}
	var b guard.AuditBody
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Principal.TenantID != c.tenant {
		return &guard.AuditChainError{Seq: r.Seq, Reason: "record of another tenant"}
	}
	return nil
}

// rawRecord is a record as stored, for -format raw and -file.
type rawRecord struct {
	Seq        int64  `json:"seq"`
	Body       string `json:"body"` // the exact bytes the hash covers
	Code       string `json:"code"`
	Delivery   string `json:"delivery"`
	SideEffect string `json:"side_effect"`
	PrevHash   string `json:"prev_hash"`
	Hash       string `json:"hash"`
}

func toRaw(r guard.AuditRecord) rawRecord {
	code := ""
	if r.Code.Valid() {
		code = r.Code.String()
	}
	return rawRecord{Seq: r.Seq, Body: string(r.Body), Code: code, Delivery: string(r.Delivery),
		SideEffect: string(r.SideEffect), PrevHash: r.PrevHash, Hash: r.Hash}
}

// fileSource reads a raw export line by line. Its head is the last record
// read, so only the records themselves are checked.
type fileSource struct {
	sc   *bufio.Scanner
	line int
	head guard.AuditHead
}

func newFileSource(r io.Reader) *fileSource {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	return &fileSource{sc: sc}
}

func (f *fileSource) Audit(_ context.Context, _ string, after int64, limit int) ([]guard.AuditRecord, guard.AuditHead, error) {
	var out []guard.AuditRecord
	for len(out) < limit && f.sc.Scan() {
		f.line++
		text := strings.TrimSpace(f.sc.Text())
		if text == "" {
			continue
		}
		var rr rawRecord
		if err := json.Unmarshal([]byte(text), &rr); err != nil || rr.Seq == 0 || rr.Hash == "" || rr.Body == "" {
			return nil, f.head, &guard.AuditChainError{Seq: f.head.Seq + 1,
				Reason: fmt.Sprintf("line %d is not a raw audit record (export with -format raw)", f.line)}
		}
		if rr.Seq <= after {
			continue
		}
		code, _ := guard.ParseCode(rr.Code)
		r := guard.AuditRecord{Seq: rr.Seq, Body: []byte(rr.Body), Code: code, Delivery: guard.Delivery(rr.Delivery),
			SideEffect: guard.SideEffect(rr.SideEffect), PrevHash: rr.PrevHash, Hash: rr.Hash}
		out = append(out, r)
		f.head = guard.AuditHead{Seq: r.Seq, Hash: r.Hash}
	}
	if err := f.sc.Err(); err != nil {
		return nil, f.head, err
	}
	return out, f.head, nil
}

// anchor is the verified head of a tenant's chain, kept in a file outside
// Redis by -anchor.
type anchor struct {
	Tenant string `json:"tenant"`
	Seq    int64  `json:"seq"`
	Hash   string `json:"hash"`
}

// readAnchor reads the anchor file; nil when it does not exist yet.
func readAnchor(path, tenant string) (*anchor, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a anchor
	if err := json.Unmarshal(b, &a); err != nil || a.Seq < 0 || (a.Seq > 0 && a.Hash == "") {
		return nil, fmt.Errorf("%s is not an anchor file", path)
	}
	if a.Tenant != tenant {
		return nil, fmt.Errorf("%s anchors tenant %q, not %q", path, a.Tenant, tenant)
	}
	return &a, nil
}

// writeAnchor replaces the anchor file (write and rename: a crash leaves
// the old anchor or the new one).
func writeAnchor(path string, a anchor) error {
	b, _ := json.Marshal(a)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// lost compares a verified chain c (read after record after) with the
// anchor, and says what was lost since: "" when the chain still reaches the
// anchored record and that record has the anchored hash.
func (a *anchor) lost(c *chain, after int64) string {
	switch {
	case c.seq < a.Seq:
		return fmt.Sprintf("the chain restarted or lost its tail since the anchor: the anchor is record %d (hash %s), "+
			"the log now ends at record %d: records %d to %d are lost", a.Seq, a.Hash, c.seq, c.seq+1, a.Seq)
	case a.Seq > after && c.watched != a.Hash:
		return fmt.Sprintf("the chain restarted or was rewritten since the anchor: record %d has hash %s, the anchor says %s: "+
			"the anchored records up to %d are not this log's", a.Seq, c.watched, a.Hash, a.Seq)
	}
	return ""
}
