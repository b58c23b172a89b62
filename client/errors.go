package client

import (
	"errors"
	"fmt"
)

// Error is a prompt failure reported by the box: the v1 error object. Code
// is one of the protocol's codes (protocol.CodeAborted, CodeTimeout, ...)
// or, from a v1 box, the name of the error it threw.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("box error %s: %s", e.Code, e.Message) }

// Sentinel errors. Errors returned by this package wrap them, so test with
// errors.Is.
var (
	// ErrClosed is returned by a closed Box or Client.
	ErrClosed = errors.New("client: closed")
	// ErrConnectionLost fails the prompts in flight when the socket
	// dropped and the session could not be resumed (a v1 box, a resume
	// refused, or every reconnect attempt failed).
	ErrConnectionLost = errors.New("client: connection lost")
	// ErrUnauthorized means the box refused the key (HTTP 401).
	ErrUnauthorized = errors.New("client: unauthorized")
	// ErrBufferFull fails a prompt whose unread events or display
	// updates outgrew the buffer set by WithEventBuffer.
	ErrBufferFull = errors.New("client: event buffer full")
	// ErrMalformedFrame fails a prompt when the box sends a frame for it
	// that cannot be decoded: waiting on would wait forever.
	ErrMalformedFrame = errors.New("client: malformed frame from the box")
	// ErrNoOutput is returned by Result.Read for a name the prompt did
	// not return.
	ErrNoOutput = errors.New("client: no such output")
	// ErrForeignOrigin is returned by Result.Read for a server ref with
	// no id whose URL is not on the box's own origin: the client will not
	// send the box's key anywhere else. (A ref with an id is fetched from
	// the box's own /files/{id}.)
	ErrForeignOrigin = errors.New("client: server ref is not on the box's origin")
)
