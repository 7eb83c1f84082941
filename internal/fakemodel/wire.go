package fakemodel

// wireFormat is a fake's wire format: what a fake server knows of its API
// and the core does not. R is its decoded request, the entry of the
// request log.
//
// For each request the server calls Decode. Unless Decode refuses it, the
// server takes the next scripted turn (its Respond may put another in
// its place; a reply of [ExhaustedText] stands in once the script is
// exhausted), answers with
// the turn's Fail refusal if it has one, and otherwise has Reply answer.
type wireFormat[R Request] struct {
	// Decode returns the request's log entry, decoded from the
	// exchange's request and body as far as they go, and the refusal the
	// real API answers it with before any turn is consumed (a wrong route
	// or method, no API key, a body it cannot read, a conversation it
	// refuses), nil for none.
	Decode func(x *exchange[R]) (R, *refusal)
	// Mark records in a log entry what the server did with it: the
	// status it answered (0 while it answers) and the index of the
	// scripted turn it consumed (-1 for none).
	Mark func(req *R, status, turn int)
	// Fail returns the error the turn answers req with instead of a reply
	// (a scripted status, a stream error for a request that does not
	// stream), nil for none.
	Fail func(t Turn, req R) *refusal
	// Reply answers req with the turn, through [exchange.Reply].
	Reply func(x *exchange[R], t Turn, req R)
}
