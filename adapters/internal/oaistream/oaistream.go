// Package oaistream reads what openai-go's streams report: an error the API
// sent inside a stream (a Responses "error" event, a Chat Completions chunk
// carrying "error"), which openai-go's ssestream stops at and returns as an
// *ssestream.StreamError holding the event, becomes the provider.APIError
// the agent loop ends the run with.
package oaistream

import (
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tidwall/gjson"

	"github.com/toolguard/toolguard/provider"
)

// Failure returns the API error that err reports from inside a stream, and
// false when err is no such error (a transport error, a decoding error):
// its Code is the error's code, or its type when it has none ("error" when
// it has neither, as kit.Failed names it), its Message the error's
// message, its StatusCode the stream's, 200.
func Failure(err error) (*provider.APIError, bool) {
	var se *ssestream.StreamError
	if !errors.As(err, &se) {
		return nil, false
	}
	e := gjson.GetBytes(se.Event.Data, "error")
	code := e.Get("code").String()
	if code == "" {
		code = e.Get("type").String()
	}
	if code == "" {
		code = "error"
	}
	return &provider.APIError{StatusCode: http.StatusOK, Code: code, Message: e.Get("message").String()}, true
}
