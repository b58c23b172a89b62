// Package client is the Go SDK host apps use to talk to Glovebox boxes.
//
// A Client holds named endpoints (a WebSocket URL and a bearer key each).
// Client.Box returns the Box for a name; a Box connects lazily on its first
// prompt, keeps its socket alive with pings, reconnects when the socket
// drops and, when the box announced the "resume" capability, resumes the
// session so that a prompt in flight survives the drop. Against a v1 box
// (no hello frame, no sequence numbers) everything works except resume: a
// dropped socket fails the prompts in flight with ErrConnectionLost.
//
// Box.Prompt sends one prompt and returns a Result: its events and display
// slots as iterators, Wait for the final message and outputs, Read to fetch
// an output, Resolve and Reject to answer display slots, and Abort.
//
// Nothing in this package blocks forever: every blocking call takes a
// context, connects and handshakes are bounded by timeouts, and a Result
// buffers what its reader has not consumed up to a cap (see
// WithEventBuffer) instead of stalling the connection. Every exported
// method is safe for concurrent use.
package client
