// Package fakeapi is the core the fake provider servers (openaitest,
// chattest, anthropictest, geminitest) share, so that each keeps only its
// API's wire format.
//
// A [Server] is a real HTTP server (net/http/httptest) playing a script
// of turns, in order, and logging the requests it receives. For each
// request it asks the fake's [Wire] to decode and check it, consumes the
// turn that answers it (or, once the script is exhausted, the fake's
// exhausted turn), and answers with the turn's scripted error, a
// [Refusal], or through [Exchange.Reply] with JSON or server-sent events
// ([SSE]), held or paced as the turn says, gzip-compressed on request.
// The package also cuts text and JSON as the real APIs stream them
// ([Chunks], [Halves], [Pieces], [Spaced]).
package fakeapi
