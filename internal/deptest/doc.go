// Package deptest holds the tests that keep the module's shape honest: the
// dependency budget of each side (protocol, client, the kit binary), the
// single WebSocket seam, and a doc comment on every package. It has no
// code of its own; run it with go test.
package deptest
