// Package protocol is the Glovebox wire contract: the WebSocket messages,
// FileRefs, the manifest (glovebox.json), the encoded storage policy, size
// strings, durations and the key fingerprint.
//
// It is wire-compatible with protocol v1 of the original TypeScript Glovebox:
// a v1 client talks to our kit and our client talks to a v1 kit. Everything
// v1 lacks is added additively (new optional fields, new message types an old
// peer ignores) and announced through capabilities in the hello frame and in
// /environment.
//
// schema/glovebox-v1.schema.json describes every frame, FileRef, the
// /environment and /health bodies and the capability, error code, file kind
// and token scope enums as JSON Schema; the tests hold this package's types
// and golden frames to it, and the TypeScript client's wire types are
// generated from it (see schema/README.md).
//
// Run records (runrecord.go) are the signed, chained account of every
// prompt a box ran, served by GET /runs/{prompt} and GET /runs?session=ID:
// the record, its canonical encoding, the per-field digests, the ed25519
// signature and the chain are specified there, with SignRun, Verify and
// VerifyRunChain.
//
// The package imports only the standard library, so every side can use it.
package protocol

// Version is the protocol version every peer speaks.
const Version = 1
