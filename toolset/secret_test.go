package toolset

import (
	"reflect"
	"slices"
	"testing"
)

type secretInner struct {
	Token string `json:"token" toolguard:"secret"`
	Plain string `json:"plain"`
}

type SecretEmbedded struct {
	PIN int `json:"pin" toolguard:"secret"`
}

type secretOuter struct {
	SecretEmbedded
	Name    string         `json:"name"`
	Key     string         `json:"key,omitempty" toolguard:"secret"`
	Ptr     *secretInner   `json:"ptr"`
	List    []secretInner  `json:"list"`
	Arr     [2]secretInner `json:"arr"`
	Skipped string         `json:"-" toolguard:"secret"`
	Whole   secretInner    `json:"whole" toolguard:"secret"`
	NoTag   string         `toolguard:"secret"`
	Self    *secretOuter   `json:"self"`
	private string         //nolint:unused // unexported: not in the JSON
}

// TestSecretPaths: the paths of the fields tagged secret, by their JSON
// names, through pointers, slices, arrays and embedded structs; a field
// encoding/json skips is not one; a type that holds itself ends.
func TestSecretPaths(t *testing.T) {
	got, recursive := secretPaths(reflect.TypeFor[secretOuter]())
	want := []string{"pin", "key", "ptr.token", "list[].token", "arr[].token", "whole", "NoTag"}
	if !slices.Equal(got, want) || !recursive {
		t.Errorf("secretPaths = %q, %v; want %q, recursive", got, recursive, want)
	}
	if p, r := secretPaths(reflect.TypeFor[secretInner]()); !slices.Equal(p, []string{"token"}) || r {
		t.Errorf("secretPaths(secretInner) = %q, %v", p, r)
	}
	if p, _ := secretPaths(reflect.TypeFor[string]()); p != nil {
		t.Errorf("a string has secret paths %q", p)
	}
	_ = secretOuter{}.private
	// A recursive output with secrets is refused when the tool is
	// declared: its deeper secrets could not be withheld.
	defer func() {
		if recover() == nil {
			t.Error("a tool whose output holds itself and declares secrets was declared")
		}
	}()
	mustSecretPaths("tree", reflect.TypeFor[secretOuter]())
}
