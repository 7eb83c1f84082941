package frameworktest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type noteIn struct {
	Text string `json:"text" jsonschema:"the note"`
}

type noteOut struct {
	Count int64 `json:"count"`
}

// NotesServer starts an in-memory MCP server "notes" with two tools:
// add_note (a write: {"text": string}, it adds a note and answers the
// count) and count_notes (a read: no arguments, it answers the count). It
// returns the transport a client connects with, and the count of notes
// added, which the test reads to see what ran. The server's session
// closes when the test ends.
func NotesServer(t testing.TB) (client mcp.Transport, notes *atomic.Int64) {
	t.Helper()
	notes = new(atomic.Int64)
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add_note", Description: "Add a note."},
		func(context.Context, *mcp.CallToolRequest, noteIn) (*mcp.CallToolResult, noteOut, error) {
			return nil, noteOut{Count: notes.Add(1)}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "count_notes", Description: "Count the notes."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, noteOut, error) {
			return nil, noteOut{Count: notes.Load()}, nil
		})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return ct, notes
}
