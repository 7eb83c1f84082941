package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/pgstore"
	"github.com/toolguard/toolguard/toolset"
)

// fill writes n audit records of tenant-a (reads, a write, a status query)
// and one of tenant-b through a guard, and returns the store.
func fill(t *testing.T, rdb redis.UniversalClient, prefix string, n int) *idem.Store {
	t.Helper()
	s, err := idem.New(rdb, idem.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	w := guardtest.NewWorld(t, s)
	a := guardtest.Principal("tenant-a", "alice")
	for i := range n {
		switch i % 3 {
		case 0:
			w.Dispatch(t, a, guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: "c" + string(rune('a'+i))})
		case 1:
			w.Dispatch(t, a, guardtest.Req{Tool: "put", Args: `{"key":"k","value":"v"}`, CallID: "c" + string(rune('a'+i))})
		default:
			w.Status(t, a, "c"+string(rune('a'+i-1)))
		}
	}
	w.Dispatch(t, guardtest.Principal("tenant-b", "bob"), guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: "cb"})
	if got, err := guard.VerifyAudit(context.Background(), s, "tenant-a"); err != nil || got != int64(n) {
		t.Fatalf("fresh log: %d records, %v", got, err)
	}
	return s
}

type outcome struct {
	code           int
	stdout, stderr string
}

func (o outcome) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(o.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func exec(args ...string) outcome {
	var stdout, stderr strings.Builder
	code := run(args, &stdout, &stderr)
	return outcome{code, stdout.String(), stderr.String()}
}

func want(t *testing.T, o outcome, code int, stderr string) {
	t.Helper()
	if o.code != code || !strings.Contains(o.stderr, stderr) {
		t.Fatalf("exit %d, stderr %q; want exit %d with %q\nstdout:\n%s", o.code, o.stderr, code, stderr, o.stdout)
	}
}

func mini(t *testing.T) (redis.UniversalClient, string) {
	t.Helper()
	mr, rdb := redistest.Mini(t)
	return rdb, "redis://" + mr.Addr() + "/0"
}

func TestPrintAndVerify(t *testing.T) {
	rdb, url := mini(t)
	fill(t, rdb, "tga:", 6)
	for _, verify := range []bool{false, true} {
		args := []string{"-redis", url, "-prefix", "tga:", "-tenant", "tenant-a"}
		if verify {
			args = append(args, "-verify")
		}
		o := exec(args...)
		want(t, o, 0, "")
		recs := o.lines(t)
		if len(recs) != 6 {
			t.Fatalf("%d lines, want 6:\n%s", len(recs), o.stdout)
		}
		for i, r := range recs {
			if r["seq"] != float64(i+1) || r["contract"] != guard.AuditContract || r["hash"] == "" {
				t.Errorf("line %d: %v", i, r)
			}
			p, _ := r["principal"].(map[string]any)
			if p["tenant_id"] != "tenant-a" {
				t.Errorf("line %d of another tenant: %v", i, r)
			}
		}
		if recs[2]["action"] != "query_status" || recs[1]["side_effect"] != "yes" {
			t.Errorf("records 2 and 3: %v, %v", recs[1], recs[2])
		}
		if verify && !strings.Contains(o.stderr, "6 records verified from record 1 to the head (seq 6") {
			t.Errorf("stderr %q", o.stderr)
		}
	}
	// An empty log verifies.
	o := exec("-redis", url, "-prefix", "tga:", "-tenant", "nobody", "-verify")
	want(t, o, 0, "0 records verified")
}

func TestBrokenChain(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		edit   func(t *testing.T, rdb redis.UniversalClient, stream, head string)
		seq    string
		reason string
		lines  int
	}{
		{"EditedBody", func(t *testing.T, rdb redis.UniversalClient, stream, _ string) {
			redistest.RewriteStream(t, rdb, stream, func(id string, v map[string]any) bool {
				if id == "2-1" {
					// The subject's name, in whatever form the store keeps the body.
					body := v["body"].(string)
					if !strings.Contains(body, "alice") {
						t.Fatalf("record 2's stored body %q does not name alice", body)
					}
					v["body"] = strings.Replace(body, "alice", "mallory", 1)
				}
				return true
			})
		}, "record 2", "edited", 1},
		{"EditedSideEffect", func(t *testing.T, rdb redis.UniversalClient, stream, _ string) {
			redistest.RewriteStream(t, rdb, stream, func(id string, v map[string]any) bool {
				if id == "5-1" {
					v["side"] = "no"
				}
				return true
			})
		}, "record 5", "edited", 4},
		{"BodyNotJSON", func(t *testing.T, rdb redis.UniversalClient, stream, _ string) {
			redistest.RewriteStream(t, rdb, stream, func(id string, v map[string]any) bool {
				if id == "3-1" {
					v["body"] = "not json"
				}
				return true
			})
		}, "record 3", "", 2},
		{"DroppedMiddle", func(t *testing.T, rdb redis.UniversalClient, stream, _ string) {
			redistest.RewriteStream(t, rdb, stream, func(id string, _ map[string]any) bool { return id != "3-1" })
		}, "record 3", "dropped", 2},
		{"DroppedTail", func(t *testing.T, rdb redis.UniversalClient, stream, _ string) {
			redistest.RewriteStream(t, rdb, stream, func(id string, _ map[string]any) bool { return id != "6-1" })
		}, "record 6", "tail", 5},
		{"EditedHead", func(t *testing.T, rdb redis.UniversalClient, _, head string) {
			if err := rdb.Set(ctx, head, "6 0000", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}, "record 7", "head", 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rdb, url := mini(t)
			s := fill(t, rdb, "tga:", 6)
			stream, head := s.AuditKeys("tenant-a")
			tc.edit(t, rdb, stream, head)
			o := exec("-redis", url, "-prefix", "tga:", "-tenant", "tenant-a", "-verify")
			want(t, o, 1, "chain broken at "+tc.seq+": ")
			if !strings.Contains(o.stderr, tc.reason) {
				t.Errorf("stderr %q does not say %q", o.stderr, tc.reason)
			}
			if n := len(o.lines(t)); n != tc.lines {
				t.Errorf("%d records printed before the break, want %d", n, tc.lines)
			}
			// guard.VerifyAudit agrees.
			_, err := guard.VerifyAudit(ctx, s, "tenant-a")
			if err == nil || !strings.Contains(err.Error(), tc.seq+":") {
				t.Errorf("VerifyAudit says %v, toolaudit %s", err, tc.seq)
			}
		})
	}
	// Without -verify an unreadable record still fails.
	rdb, url := mini(t)
	s := fill(t, rdb, "tga:", 3)
	stream, _ := s.AuditKeys("tenant-a")
	redistest.RewriteStream(t, rdb, stream, func(id string, v map[string]any) bool {
		if id == "2-1" {
			v["body"] = "not json"
		}
		return true
	})
	want(t, exec("-redis", url, "-prefix", "tga:", "-tenant", "tenant-a"), 1, "record 2")
}

// An export continues after the last one, and a trimmed log verifies from
// the hash the export recorded.
func TestAfterAndTrim(t *testing.T) {
	rdb, url := mini(t)
	s := fill(t, rdb, "tga:", 6)
	base := []string{"-redis", url, "-prefix", "tga:", "-tenant", "tenant-a", "-verify"}
	first := exec(base...)
	want(t, first, 0, "")
	hash2 := first.lines(t)[1]["hash"].(string)

	o := exec(append(base, "-after", "2", "-prev", hash2)...)
	want(t, o, 0, "4 records verified from record 3 to the head")
	if recs := o.lines(t); len(recs) != 4 || recs[0]["seq"] != float64(3) {
		t.Fatalf("after 2: %v", recs)
	}
	want(t, exec(append(base, "-after", "2", "-prev", strings.Repeat("0", 40))...), 1, "chain broken at record 3: prev hash")

	// Trim records 1 and 2, as docs/operations.md describes.
	stream, _ := s.AuditKeys("tenant-a")
	if err := rdb.XTrimMinID(context.Background(), stream, "3-0").Err(); err != nil {
		t.Fatal(err)
	}
	want(t, exec(base...), 1, "chain broken at record 1: found record 3")
	want(t, exec(append(base, "-after", "2", "-prev", hash2)...), 0, "4 records verified")
	want(t, exec(append(base, "-after", "2")...), 0, "unchecked: pass -prev")
	// Nothing after the head: the head must be the anchor.
	hash6 := first.lines(t)[5]["hash"].(string)
	want(t, exec(append(base, "-after", "6", "-prev", hash6)...), 0, "0 records verified")
	want(t, exec(append(base, "-after", "6", "-prev", hash2)...), 1, "chain broken at record 7")
}

func TestUsageAndConnectionErrors(t *testing.T) {
	_, url := mini(t)
	want(t, exec("-redis", url), 2, "-tenant is required")
	want(t, exec("-redis", url, "-tenant", "t", "extra"), 2, "unexpected arguments")
	want(t, exec("-nope"), 2, "flag provided but not defined")
	want(t, exec("-redis", url, "-tenant", "t", "-prev", "abc"), 2, "-prev needs -after")
	want(t, exec("-redis", url, "-tenant", "t", "-after", "-1"), 2, "must not be negative")
	want(t, exec("-redis", url, "-tenant", "t", "-prefix", "a{b"), 2, "-prefix")

	mr := miniredis.RunT(t)
	dead := mr.Addr()
	mr.Close()
	want(t, exec("-redis", "redis://"+dead+"/0", "-tenant", "t"), 2, "toolaudit: -store:")
	want(t, exec("-redis", dead, "-tenant", "t"), 2, "toolaudit: -store:")
	want(t, exec("-redis", "bogus://x", "-tenant", "t"), 2, "toolaudit: -store:")
	want(t, exec("-redis", " , ", "-tenant", "t"), 2, "toolaudit: -store:")
}

func TestKeys(t *testing.T) {
	s, _ := idem.New(nil, idem.Options{Prefix: "tga:"})
	stream, head := s.AuditKeys("tenant-a")
	o := exec("-prefix", "tga:", "-tenant", "tenant-a", "-keys")
	want(t, o, 0, "")
	if o.stdout != "stream "+stream+"\nhead "+head+"\n" {
		t.Errorf("stdout %q", o.stdout)
	}
}

// On a real cluster, given as an address list.
func TestCluster(t *testing.T) {
	rdb := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	fill(t, rdb, prefix, 4)
	o := exec("-redis", os.Getenv(redistest.EnvCluster), "-prefix", prefix, "-tenant", "tenant-a", "-verify")
	want(t, o, 0, "4 records verified")
}

// The retention procedure of docs/operations.md: export raw, keep the
// anchor, trim, write more, export the rest, verify the archive offline.
func TestRawExportTrimAndVerifyFile(t *testing.T) {
	rdb, url := mini(t)
	s, err := idem.New(rdb, idem.Options{Prefix: "tga:"})
	if err != nil {
		t.Fatal(err)
	}
	w := guardtest.NewWorld(t, s)
	a := guardtest.Principal("tenant-a", "alice")
	dispatch := func(from, to int) {
		for i := from; i <= to; i++ {
			w.Dispatch(t, a, guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: "c" + string(rune('a'+i))})
		}
	}
	dispatch(1, 6)
	base := []string{"-redis", url, "-prefix", "tga:", "-tenant", "tenant-a"}

	first := exec(append(base, "-verify", "-format", "raw")...)
	want(t, first, 0, "6 records verified from record 1 to the head (seq 6, hash ")
	var last struct {
		Seq  int64
		Hash string
		Body string
	}
	lines := strings.Split(strings.TrimSpace(first.stdout), "\n")
	if err := json.Unmarshal([]byte(lines[5]), &last); err != nil || last.Seq != 6 || !strings.HasPrefix(last.Body, `{"contract":"tool-audit-v2"`) {
		t.Fatalf("raw line %q: %v", lines[5], err)
	}
	if !strings.Contains(first.stderr, last.Hash) {
		t.Errorf("the summary %q does not name the anchor hash %s", first.stderr, last.Hash)
	}

	// Trim what was exported; the rest verifies from the anchor.
	stream, _ := s.AuditKeys("tenant-a")
	if err := rdb.XTrimMinID(context.Background(), stream, "7-0").Err(); err != nil {
		t.Fatal(err)
	}
	dispatch(7, 9)
	second := exec(append(base, "-verify", "-format", "raw", "-after", "6", "-prev", last.Hash)...)
	want(t, second, 0, "3 records verified from record 7 to the head (seq 9")

	dir := t.TempDir()
	archive := dir + "/tenant-a.jsonl"
	if err := os.WriteFile(archive, []byte(first.stdout+second.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	o := exec("-file", archive, "-tenant", "tenant-a", "-verify")
	want(t, o, 0, "9 records verified from record 1 to the end of the file (seq 9")
	if recs := o.lines(t); len(recs) != 9 || recs[8]["seq"] != float64(9) || recs[0]["contract"] != guard.AuditContract {
		t.Errorf("flat records from the file: %d", len(recs))
	}
	// The file alone, from the anchor.
	tail := dir + "/tail.jsonl"
	_ = os.WriteFile(tail, []byte(second.stdout), 0o600)
	want(t, exec("-file", tail, "-tenant", "tenant-a", "-verify", "-after", "6", "-prev", last.Hash), 0, "3 records verified")

	// An edited archive, a flat export, another tenant's archive: exit 1.
	edited := strings.Replace(first.stdout+second.stdout, `\"call_id\":\"ce\"`, `\"call_id\":\"cX\"`, 1)
	if edited == first.stdout+second.stdout {
		t.Fatal("nothing edited")
	}
	_ = os.WriteFile(archive, []byte(edited), 0o600)
	want(t, exec("-file", archive, "-tenant", "tenant-a", "-verify"), 1, "chain broken at record 4: hash does not match")
	flat := exec(base...)
	_ = os.WriteFile(archive, []byte(flat.stdout), 0o600)
	want(t, exec("-file", archive, "-tenant", "tenant-a", "-verify", "-after", "6"), 1, "line 1 is not a raw audit record")
	_ = os.WriteFile(archive, []byte(first.stdout), 0o600)
	want(t, exec("-file", archive, "-tenant", "tenant-b", "-verify"), 1, "chain broken at record 1: record of another tenant")
	want(t, exec("-file", dir+"/missing.jsonl", "-tenant", "tenant-a"), 2, "-file:")
	want(t, exec(append(base, "-format", "xml")...), 2, "-format is flat or raw")
}

// A whole chain copied from another tenant links up by itself; the tenant
// check catches it.
func TestChainOfAnotherTenant(t *testing.T) {
	ctx := context.Background()
	rdb, url := mini(t)
	s := fill(t, rdb, "tga:", 3)
	streamA, headA := s.AuditKeys("tenant-a")
	streamB, headB := s.AuditKeys("tenant-b")
	for _, k := range [][2]string{{streamB, streamA}, {headB, headA}} {
		if err := rdb.Copy(ctx, k[0], k[1], 0, true).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := guard.VerifyAudit(ctx, s, "tenant-a"); err != nil {
		t.Fatalf("VerifyAudit: %v (the copied chain is valid by itself)", err)
	}
	want(t, exec("-redis", url, "-prefix", "tga:", "-tenant", "tenant-a", "-verify"), 1, "chain broken at record 1: record of another tenant")
}

// TestConformanceRunStore: the store a conformance run wrote verifies, case
// by case, and fails once a record is edited.
func TestConformanceRunStore(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: mr.Addr()})
	defer rdb.Close()
	f, err := cases.Load("../../testdata/tool-cases-v2.json")
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Cases {
		c := &f.Cases[i]
		prefix := "tgcases:test:" + c.ID + ":"
		s, err := idem.New(rdb, idem.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		if rep := cases.Run(context.Background(), c, cases.World{Store: s, Close: func() {}}); !rep.Passed() {
			t.Fatalf("case %s failed", c.ID)
		}
		o := exec("-redis", "redis://"+mr.Addr(), "-prefix", prefix, "-tenant", c.Principal.TenantID, "-verify")
		if o.code != 0 || len(o.lines(t)) != len(c.Steps) {
			t.Fatalf("case %s: exit %d, %d records for %d steps\n%s", c.ID, o.code, len(o.lines(t)), len(c.Steps), o.stderr)
		}
	}
	last := &f.Cases[len(f.Cases)-1]
	prefix := "tgcases:test:" + last.ID + ":"
	s, _ := idem.New(rdb, idem.Options{Prefix: prefix})
	stream, _ := s.AuditKeys(last.Principal.TenantID)
	redistest.RewriteStream(t, rdb, stream, func(id string, v map[string]any) bool {
		if id == "1-1" {
			v["code"] = "OK"
		}
		return true
	})
	o := exec("-redis", "redis://"+mr.Addr(), "-prefix", prefix, "-tenant", last.Principal.TenantID, "-verify")
	if o.code != 1 || !strings.Contains(o.stderr, "record 1") {
		t.Fatalf("edited record: exit %d, stderr %q; want 1 naming record 1", o.code, o.stderr)
	}
}

// more writes n reads of tenant-a, with call ids from tag.
func more(t *testing.T, s *idem.Store, tag string, n int) {
	t.Helper()
	w := guardtest.NewWorld(t, s)
	for i := range n {
		w.Dispatch(t, guardtest.Principal("tenant-a", "alice"), guardtest.Req{Tool: "get", Args: `{"key":"k"}`, CallID: tag + string(rune('a'+i))})
	}
}

func readAnchorFile(t *testing.T, path string) anchor {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var a anchor
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// An anchor kept outside Redis detects a chain that restarted (its records
// and head gone, new ones from 1) or lost its tail, which verify alone
// cannot: such a chain is consistent by itself.
func TestAnchor(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (redis.UniversalClient, *idem.Store, []string, string) {
		rdb, url := mini(t)
		s := fill(t, rdb, "tga:", 6)
		path := t.TempDir() + "/tenant-a.anchor"
		args := []string{"-redis", url, "-prefix", "tga:", "-tenant", "tenant-a", "-anchor", path}
		o := exec(args...)
		want(t, o, 0, "anchor "+path+" now at record 6 (new)")
		if len(o.lines(t)) != 6 || !strings.Contains(o.stderr, "6 records verified") {
			t.Fatalf("-anchor does not verify: %q", o.stderr)
		}
		_, head := s.AuditKeys("tenant-a")
		seq, hash, _ := strings.Cut(rdb.Get(ctx, head).Val(), " ")
		if a := readAnchorFile(t, path); a.Tenant != "tenant-a" || seq != "6" || a.Seq != 6 || a.Hash != hash {
			t.Fatalf("anchor %+v, head %s %s", a, seq, hash)
		}
		return rdb, s, args, path
	}
	restart := func(t *testing.T, rdb redis.UniversalClient, s *idem.Store) {
		stream, head := s.AuditKeys("tenant-a")
		if err := rdb.Del(ctx, stream, head).Err(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("Growth", func(t *testing.T) {
		_, s, args, path := setup(t)
		more(t, s, "g", 2)
		want(t, exec(args...), 0, "anchor "+path+" now at record 8 (was record 6)")
		if a := readAnchorFile(t, path); a.Seq != 8 {
			t.Fatalf("anchor %+v did not advance", a)
		}
		want(t, exec(args...), 0, "now at record 8 (was record 8)")
	})
	t.Run("Restarted", func(t *testing.T) {
		rdb, s, args, path := setup(t)
		before := readAnchorFile(t, path)
		restart(t, rdb, s)
		more(t, s, "r", 3)
		if _, err := guard.VerifyAudit(ctx, s, "tenant-a"); err != nil {
			t.Fatalf("the restarted chain is consistent by itself: %v", err)
		}
		want(t, exec(args...), 1, `tenant "tenant-a": the chain restarted or lost its tail since the anchor: `+
			"the anchor is record 6 (hash "+before.Hash+"), the log now ends at record 3: records 4 to 6 are lost")
		if a := readAnchorFile(t, path); a != before {
			t.Fatalf("a failed verification moved the anchor to %+v", a)
		}
		// Grown past the anchor, the restarted chain is still caught.
		more(t, s, "s", 4)
		want(t, exec(args...), 1, "restarted or was rewritten since the anchor: record 6 has hash ")
	})
	t.Run("TruncatedTail", func(t *testing.T) {
		rdb, s, args, _ := setup(t)
		recs := exec(args[:len(args)-2]...).lines(t)
		stream, head := s.AuditKeys("tenant-a")
		// The tail and the head go back together, as after a failover to
		// a replica that had not received them.
		redistest.RewriteStream(t, rdb, stream, func(id string, _ map[string]any) bool { return id != "5-1" && id != "6-1" })
		if err := rdb.Set(ctx, head, "4 "+recs[3]["hash"].(string), 0).Err(); err != nil {
			t.Fatal(err)
		}
		want(t, exec(args...), 1, "the log now ends at record 4: records 5 to 6 are lost")
		more(t, s, "t", 2) // new records 5 and 6
		want(t, exec(args...), 1, "record 6 has hash ")
	})
	t.Run("TrimmedFromAnchor", func(t *testing.T) {
		rdb, s, args, path := setup(t)
		stream, _ := s.AuditKeys("tenant-a")
		if err := rdb.XTrimMinID(ctx, stream, "7-0").Err(); err != nil {
			t.Fatal(err)
		}
		more(t, s, "m", 2)
		// -after the anchor: its hash is the link checked, without -prev.
		o := exec(append(args, "-after", "6")...)
		want(t, o, 0, "2 records verified from record 7 to the head")
		if strings.Contains(o.stderr, "unchecked") || readAnchorFile(t, path).Seq != 8 {
			t.Fatalf("stderr %q", o.stderr)
		}
		want(t, exec(append(args, "-after", "8", "-prev", strings.Repeat("0", 40))...), 2, "disagrees with the anchor")
	})
	t.Run("Refused", func(t *testing.T) {
		_, _, args, path := setup(t)
		want(t, exec("-redis", args[1], "-tenant", "tenant-b", "-anchor", path), 2, `anchors tenant "tenant-a", not "tenant-b"`)
		want(t, exec("-file", path, "-tenant", "tenant-a", "-anchor", path), 2, "-anchor guards the log in Redis")
		_ = os.WriteFile(path, []byte("junk"), 0o600)
		want(t, exec(args...), 2, "is not an anchor file")
	})
}

type secretPayIn struct {
	Amount int    `json:"amount"`
	Card   string `json:"card" toolguard:"secret"`
}

// TestVerifyWithSecrets: records whose logged arguments hold a declared
// secret keep its keyed hash; toolaudit prints and verifies them, and the
// export holds the hash an auditor checks, never the value.
func TestVerifyWithSecrets(t *testing.T) {
	rdb, url := mini(t)
	s, err := idem.New(rdb, idem.Options{Prefix: "tgs:"})
	if err != nil {
		t.Fatal(err)
	}
	pay := toolset.Write("pay", "Pay.", func(context.Context, *guard.Invocation, secretPayIn) (string, error) { return "paid", nil },
		&toolset.Options[secretPayIn, string]{LoggedArguments: []string{"amount", "card"}})
	key := []byte(strings.Repeat("z", 32))
	g := guard.New(toolset.MustNew(pay), s, guard.Options{SecretKey: key})
	for i, card := range []string{"4111111111111111", "5500005555555559"} {
		res, err := g.Dispatch(context.Background(), guard.Call{Principal: guardtest.Principal("tenant-s", "u"),
			Proposal: guard.Proposal{Name: "pay", Arguments: []byte(`{"amount":5,"card":"` + card + `"}`)},
			Context:  guard.ExecutionContext{CallID: "c" + string(rune('0'+i)), IdempotencyKey: "k" + string(rune('0'+i))}})
		if err != nil || res.Code != guard.CodeOK {
			t.Fatalf("pay: %v %v", res, err)
		}
	}
	o := exec("-redis", url, "-prefix", "tgs:", "-tenant", "tenant-s", "-verify")
	want(t, o, 0, "2 records verified")
	if strings.Contains(o.stdout, "4111111111111111") || strings.Contains(o.stdout, "5500005555555559") {
		t.Fatalf("the export holds a card number:\n%s", o.stdout)
	}
	known, _ := guard.SecretHash(key, "5500005555555559")
	recs := o.lines(t)
	args, _ := recs[1]["arguments"].(map[string]any)
	card, _ := args["card"].(map[string]any)
	if card["hmac-sha256"] != known || args["amount"] != float64(5) {
		t.Errorf("record 2's arguments = %v; want the card's keyed hash %s", args, known)
	}
}

// TestPostgres: the seed suite's logs on the Postgres store, each case in
// a schema of its own, verify with -store postgres://… -schema; a record
// edited afterwards fails naming it, and an anchor detects a dropped tail.
func TestPostgres(t *testing.T) {
	db := pgtest.NewDB(t)
	pool := pgtest.Pool(t, db, 2)
	ctx := context.Background()
	f, err := cases.Load("../../testdata/tool-cases-v2.json")
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Cases {
		c := &f.Cases[i]
		schema := fmt.Sprintf("case_%d", i)
		s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		if rep := cases.Run(ctx, c, cases.World{Store: s, Close: func() {}}); !rep.Passed() {
			t.Fatalf("case %s failed", c.ID)
		}
		o := exec("-store", db, "-schema", schema, "-tenant", c.Principal.TenantID, "-verify")
		if o.code != 0 || len(o.lines(t)) != len(c.Steps) {
			t.Fatalf("case %s: exit %d, %d records for %d steps\n%s", c.ID, o.code, len(o.lines(t)), len(c.Steps), o.stderr)
		}
	}
	last := f.Cases[len(f.Cases)-1].Principal.TenantID
	schema := fmt.Sprintf("case_%d", len(f.Cases)-1)
	anchorFile := t.TempDir() + "/anchor.json"
	want(t, exec("-store", db, "-schema", schema, "-tenant", last, "-anchor", anchorFile), 0, "")
	var code string
	if err := pool.QueryRow(ctx, "SELECT code FROM "+schema+".audit WHERE seq = 1").Scan(&code); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".audit SET code = 'CALL_ID_CONFLICT' WHERE seq = 1"); err != nil {
		t.Fatal(err)
	}
	o := exec("-store", db, "-schema", schema, "-tenant", last, "-verify")
	if o.code != 1 || !strings.Contains(o.stderr, "record 1") {
		t.Fatalf("edited record: exit %d, stderr %q; want 1 naming record 1", o.code, o.stderr)
	}
	// The tail and its head deleted together: consistent by itself, the
	// anchor says what was lost.
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".audit SET code = $1 WHERE seq = 1", code); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := pool.QueryRow(ctx, "SELECT seq FROM "+schema+".heads").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("the last seed case has %d records: nothing to drop", n)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM "+schema+".audit WHERE seq = $1", n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE "+schema+".heads SET seq = a.seq, hash = a.hash FROM "+schema+".audit a WHERE a.seq = $1", n-1); err != nil {
		t.Fatal(err)
	}
	want(t, exec("-store", db, "-schema", schema, "-tenant", last, "-verify"), 0, "")
	want(t, exec("-store", db, "-schema", schema, "-tenant", last, "-anchor", anchorFile), 1, "lost its tail")
	want(t, exec("-store", "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", "-tenant", "t"), 2, "toolaudit: -store:")
}
