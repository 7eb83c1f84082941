package pgstore

import (
	"errors"
	"testing"
)

// TestCheckVersion: a server before PostgreSQL 13 is refused with
// ErrServerTooOld naming its version; 13 and later are accepted. (No
// server before 13 runs here: the check is the function New calls with
// the server's server_version_num.)
func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		version int
		want    error
	}{{90624, ErrServerTooOld}, {120017, ErrServerTooOld}, {130000, nil}, {150020, nil}, {170002, nil}} {
		err := checkVersion(c.version)
		if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
			t.Errorf("version %d: %v, want %v", c.version, err, c.want)
		}
	}
	if err := checkVersion(120017); err == nil || err.Error() != "pgstore: the server is older than PostgreSQL 13 (it is 12.17); upgrade the server" {
		t.Errorf("the refusal does not name the version: %v", err)
	}
}
