package toolset

import (
	"reflect"
	"slices"
	"strings"
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

type secretShapes struct {
	Accounts map[string]secretInner             `json:"accounts"`
	Nested   map[int][]*secretInner             `json:"nested"`
	Body     JSONText[secretInner]              `json:"body"`
	Bodies   []JSONText[map[string]secretInner] `json:"bodies"`
	Dotted   string                             `json:"a.b[]" toolguard:"secret"`
	Raw      []byte                             `json:"raw"`
}

type secretDynamic struct {
	Name  string `json:"name"`
	Extra any    `json:"extra"`
}

// TestSecretPathsShapes: the paths reach map values ({}), JSONText (#)
// and names with the path syntax's characters (escaped); a type with an
// interface in it, or one that holds itself with secrets, is walked at
// run time.
func TestSecretPathsShapes(t *testing.T) {
	s := secretsOf(reflect.TypeFor[secretShapes]())
	want := []string{"accounts{}.token", "nested{}[].token", "body#.token", "bodies[]#{}.token", `a\.b\[\]`}
	if !slices.Equal(s.paths, want) || s.walk {
		t.Errorf("secretsOf = %q, walk %v; want %q", s.paths, s.walk, want)
	}
	if s := secretsOf(reflect.TypeFor[[]secretInner]()); !slices.Equal(s.paths, []string{"[].token"}) || s.walk {
		t.Errorf("root slice: %+v", s)
	}
	if s := secretsOf(reflect.TypeFor[secretDynamic]()); len(s.paths) != 0 || !s.walk {
		t.Errorf("an any field: %+v", s)
	}
	if s := secretsOf(reflect.TypeFor[secretOuter]()); !s.walk {
		t.Errorf("a type that holds itself: %+v", s)
	}
	if s := secretsOf(reflect.TypeFor[secretInner]()); s.walk {
		t.Errorf("a plain struct is walked: %+v", s)
	}
}

// TestRuntimeSecrets: the walk of a value names each marked field where
// it stands, through interfaces, maps (keys as encoding/json writes them),
// slices, pointers and JSONText, and skips nil pointers and interfaces.
func TestRuntimeSecrets(t *testing.T) {
	v := secretDynamic{Name: "n", Extra: map[int]any{
		7:  []any{secretInner{Token: "a"}, nil, (*secretInner)(nil), &secretInner{Token: "b"}},
		-1: JSONText[any]{Value: secretInner{}},
	}}
	got := runtimeSecrets(reflect.ValueOf(v), "", nil)
	slices.Sort(got)
	want := []string{"extra.-1#.token", "extra.7[0].token", "extra.7[3].token"}
	if !slices.Equal(got, want) {
		t.Errorf("runtimeSecrets = %q, want %q", got, want)
	}
	if got := runtimeSecrets(reflect.ValueOf(nil), "", nil); got != nil {
		t.Errorf("a nil output: %q", got)
	}
}

// TestJSONTextRefusedInInput: a JSONText in an input would make the schema
// lie (the model writes JSON, not JSON in a string).
func TestJSONTextRefusedInInput(t *testing.T) {
	type in struct {
		Body JSONText[secretInner] `json:"body"`
	}
	if _, err := schemaForType(reflect.TypeFor[in]()); err == nil || !strings.Contains(err.Error(), "JSONText is for outputs") {
		t.Errorf("schemaForType = %v", err)
	}
}
