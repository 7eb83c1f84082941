package guard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

type benchRecord struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	Note   string   `json:"note"`
	Amount float64  `json:"amount"`
	Tags   []string `json:"tags"`
}

type benchOut struct {
	Records []benchRecord `json:"records"`
	Key     string        `json:"key" toolguard:"secret"`
}

// benchOutput is an output of about size bytes: records of ids, names,
// prose and numbers, and one declared secret.
func benchOutput(size int) benchOut {
	out := benchOut{Key: "sk-live-BENCHKEY0123456789"}
	for i := 0; 110*len(out.Records) < size; i++ {
		out.Records = append(out.Records, benchRecord{ID: fmt.Sprintf("ORDER-%06d", i), Name: "Ada Lovelace",
			Note: "Customer asked about the refund; \"see\" ticket", Amount: 12.5 + float64(i), Tags: []string{"refund", "vip"}})
	}
	return out
}

// quiet is a detector that finds nothing, at no cost: with it a benchmark
// measures the guard's own parse and walk of the output.
type quiet struct{}

func (quiet) Find(string) []string { return nil }

// exact is a detector that finds one known text, at almost no cost.
type exact string

func (e exact) Find(s string) []string {
	if strings.Contains(s, string(e)) {
		return []string{string(e)}
	}
	return nil
}

// BenchmarkOutputRedaction measures a read's dispatch (over the store of
// BenchmarkGuardCPU, which does no work) whose tool returns an output of
// 1 KB or 100 KB: "plain" with no secret declared and no detector (no
// walk), "declared" with one declared secret, "walk" with a declared
// secret and a detector that finds nothing (the guard's parse and walk of
// every string, the detector's own cost aside), "found" with a detector
// that finds the declared key again in every note (at no cost of its own).
func BenchmarkOutputRedaction(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		out := benchOutput(size)
		withNote := out
		withNote.Records = append([]benchRecord(nil), out.Records...)
		for i := range withNote.Records {
			withNote.Records[i].Note += " " + out.Key
		}
		type plainOut struct {
			Records []benchRecord `json:"records"`
			Key     string        `json:"key"`
		}
		for _, bc := range []struct {
			name string
			opts guard.Options
			tool toolset.Declared
		}{
			{"plain", guard.Options{}, toolset.Read("get", "", func(context.Context, *guard.Invocation, in) (plainOut, error) {
				return plainOut(out), nil
			}, nil)},
			{"declared", guard.Options{}, toolset.Read("get", "", func(context.Context, *guard.Invocation, in) (benchOut, error) {
				return out, nil
			}, nil)},
			{"walk", guard.Options{Detector: quiet{}}, toolset.Read("get", "", func(context.Context, *guard.Invocation, in) (benchOut, error) {
				return out, nil
			}, nil)},
			{"found", guard.Options{Detector: exact(out.Key)}, toolset.Read("get", "", func(context.Context, *guard.Invocation, in) (benchOut, error) {
				return withNote, nil
			}, nil)},
		} {
			b.Run(fmt.Sprintf("%s/%dKB", bc.name, size>>10), func(b *testing.B) {
				bc.opts.SecretKey = secretKey
				g := guard.New(toolset.MustNew(bc.tool), stubStore{}, bc.opts)
				call := guard.Call{Principal: guard.Principal{TenantID: "t", SubjectID: "u"},
					Proposal: guard.Proposal{Name: "get", Arguments: []byte(`{"n":1}`)}, Context: guard.ExecutionContext{CallID: "c"}}
				res, err := g.Dispatch(context.Background(), call)
				if err != nil || res.Code != guard.CodeOK || (bc.name != "plain" && strings.Contains(string(res.Data), out.Key)) {
					b.Fatalf("%v %v", res, err)
				}
				b.SetBytes(int64(len(res.Data)))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := g.Dispatch(context.Background(), call); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
