package main

import "testing"

// TestOffline runs the example on the SDK's test environment.
func TestOffline(t *testing.T) {
	if err := run("", "default", "toolguard-refund"); err != nil {
		t.Fatal(err)
	}
}
