package toolset

import (
	"encoding/json"
	"reflect"
)

// JSONText is a value of T that is written as a JSON string holding T's
// JSON: for an output member whose consumer expects JSON as text (an
// upstream body passed on, a document). It declares what the text holds,
// so the secrets T declares (toolguard:"secret") are withheld inside the
// text as they are anywhere else: the guard parses the string, withholds
// them, and writes it again (guard's secret path suffix "#").
//
//	type Out struct {
//		Body toolset.JSONText[Upstream] `json:"body"` // "{\"token\":\"…\"}": token withheld
//	}
type JSONText[T any] struct {
	Value T
}

// MarshalJSON writes the JSON of Value as a JSON string.
func (j JSONText[T]) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(j.Value)
	if err != nil {
		return nil, err
	}
	return json.Marshal(string(b))
}

// UnmarshalJSON reads a JSON string holding the JSON of a T.
func (j *JSONText[T]) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return json.Unmarshal([]byte(s), &j.Value)
}

// jsonTextOf is how the secret walks find T in a JSONText[T] (whose
// value is its field 0).
func (JSONText[T]) jsonTextOf() reflect.Type { return reflect.TypeFor[T]() }

// jsonTexter is implemented by every JSONText.
type jsonTexter interface {
	jsonTextOf() reflect.Type
}

var jsonTexterType = reflect.TypeFor[jsonTexter]()
