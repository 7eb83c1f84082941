// Package fakemodel is a fake model provider for tests and offline
// examples: one script of [Turn]s, neutral to the API, played by a real
// HTTP server (net/http/httptest) in the wire format of one of the four
// APIs toolguard adapts: [NewOpenAI] (OpenAI Responses), [NewChat] (Chat
// Completions), [NewAnthropic] (Anthropic Messages), [NewGemini] (Gemini
// API). The real SDK clients talk to it; nothing is mocked above HTTP.
//
// Each request consumes the next turn (or what its Respond function makes
// of the [Request]), once the script is exhausted a reply of
// [ExhaustedText]; each server checks the requests as its API does,
// refusing without consuming a turn what the API refuses, and logs them
// (Requests, in order, refused ones too). A turn answers with a scripted
// error, or a reply, streamed as server-sent events when the request
// asks, held or paced as the turn says, gzip-compressed on request.
//
// The per-API details are in each server's file: openai.go, chat.go,
// anthropic.go, gemini.go; server.go and the files it uses are the core
// they share.
package fakemodel
