package protocol

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Run records. A box keeps, for every prompt it runs, a record of what
// ran: the box (its closure hash and the digest of its manifest), the
// session and the prompt, the prompt's digest (its text only when the
// manifest's runs.record_text says so), the agent, the digests of the
// inputs and outputs, every egress decision of the prompt with its rule,
// the limits hit, the outcome and the agent's exit status, and when it
// started and ended. The box signs each record with an ed25519 key derived
// from the box key, whose public half the manifest (runs.public_key) and
// GET /environment carry: whoever holds the manifest verifies a record
// without the box key.
//
// The signing key's seed is HMAC-SHA256(box key, "glovebox run record
// v1") (RunSigningKey). Changing the box key changes it.
//
// A SignedRun is
//
//	{"record": {...}, "digests": {FIELD: HEX, ...}, "digest": HEX,
//	 "public_key": BASE64, "signature": BASE64}
//
// digests holds one SHA-256 (lower-case hex) per field of the record:
// each top-level key of "record" is a field, except the members of
// "inputs" and "outputs" (the field "inputs/NAME" per input) and the
// entries of "egress" (the field "egress/N", from 0). A field's digest is
// the SHA-256 of its value's canonical encoding (below). digest is the
// SHA-256 of the canonical encoding of digests, and the signature is
// ed25519 over RunSignContext followed by those same bytes. public_key is
// the signer's, for the message a verifier gives when it is not the key
// it expected; it is never trusted for verification.
//
// Canonical encoding: JSON with no whitespace, object keys sorted by
// their UTF-8 bytes, strings escaped as JSON.stringify escapes them (",
// \ and the control characters below U+0020 only: \b \f \n \r \t, others
// as \u00xx), and integers only, written in decimal without exponent
// (every number of a record is an integer within ±2^53). JSON.parse
// followed by a recursive key sort and JSON.stringify produces it, so a
// verifier in any language recomputes the digests.
//
// Because each field is signed through its own digest, a verifier that
// finds the signature good but a field's value changed names that field.
//
// Chain. Records of one session are numbered by seq from 1 and each names
// the digest of the previous one in prev; the first names
// RunChainStart(session). A missing, added or reordered record breaks a
// link, and VerifyRunChain says which.

// RunRecordVersion is the record format's version (the record's "v").
const RunRecordVersion = 1

// RunSignContext precedes the signed bytes, so that a run record's
// signature is never valid for anything else signed with the same key.
const RunSignContext = "glovebox run record v1\n"

// RunsSpec is the manifest's runs block and the /environment view of it.
type RunsSpec struct {
	// PublicKey is the run records' ed25519 public key (standard base64),
	// RunPublicKey of the box key.
	PublicKey string `json:"public_key,omitempty"`
	// RecordText keeps each prompt's text in its record
	// (glovebox.toml [runs] record_text = true); otherwise the record has
	// its digest only.
	RecordText bool `json:"record_text,omitempty"`
}

// RunRecord is what a box records about one prompt.
type RunRecord struct {
	V int `json:"v"`
	// ClosureHash names the box's Nix closure, when the box knows it.
	ClosureHash string `json:"closure_hash,omitempty"`
	// ManifestDigest is the SHA-256 (hex) of the manifest bytes the box
	// loaded.
	ManifestDigest string `json:"manifest_digest"`
	Session        string `json:"session"`
	Seq            int64  `json:"seq"`
	// Prev is the digest of the session's previous record, or
	// RunChainStart(Session) for the first.
	Prev   string `json:"prev"`
	Prompt string `json:"prompt"`
	// PromptDigest is the SHA-256 (hex) of the prompt's text as sent.
	PromptDigest string `json:"prompt_digest"`
	// PromptText is the text, when the box records it.
	PromptText string `json:"prompt_text,omitempty"`
	// Agent is the agent's type, and its name or command when it has one
	// ("acp:claude", "exec").
	Agent   string              `json:"agent"`
	Inputs  map[string]RunFile  `json:"inputs,omitempty"`
	Outputs map[string]RunFile  `json:"outputs,omitempty"`
	Egress  []RunEgressDecision `json:"egress,omitempty"`
	// EgressDropped counts the prompt's decisions left out of Egress
	// (over MaxRunEgress, or gone from the box's audit trail).
	EgressDropped int64 `json:"egress_dropped,omitempty"`
	// Limits are the limits the prompt hit: memory, pids, disk, timeout.
	Limits []string `json:"limits,omitempty"`
	// Outcome is "complete" or the error code the client got.
	Outcome string `json:"outcome"`
	// ExitCode is the exit status the agent reported, if any.
	ExitCode *int64 `json:"exit_code,omitempty"`
	Started  string `json:"started"` // RFC 3339, UTC, nanoseconds
	Ended    string `json:"ended"`
	// DurationMS is Ended - Started in milliseconds.
	DurationMS int64 `json:"duration_ms"`
}

// RunFile is an input's or output's digest and size.
type RunFile struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// RunEgressDecision is one egress decision of a prompt, as the audit
// trail (GET /egress/log) has it. Its fields are in key order, so that its
// JSON is already canonical.
type RunEgressDecision struct {
	Decision string `json:"decision"`
	Host     string `json:"host"`
	Line     string `json:"line,omitempty"`
	Port     int    `json:"port"`
	Proto    string `json:"proto"`
	Rule     string `json:"rule,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
	Time     string `json:"time"`
}

// MaxRunEgress bounds the egress decisions one record lists.
const MaxRunEgress = 256

// SignedRun is a run record with its field digests and signature.
type SignedRun struct {
	Record    json.RawMessage   `json:"record"`
	Digests   map[string]string `json:"digests"`
	Digest    string            `json:"digest"`
	PublicKey string            `json:"public_key"`
	Signature string            `json:"signature"`

	signed []byte // canonicalDigests(Digests), when SignRun made it
}

// RunChain is the body of GET /runs?session=ID: the session's records in
// order.
type RunChain struct {
	Session string      `json:"session"`
	Records []SignedRun `json:"records"`
}

// RunSigningKey derives the run records' signing key from a box key.
func RunSigningKey(boxKey string) ed25519.PrivateKey {
	m := hmac.New(sha256.New, []byte(boxKey))
	m.Write([]byte("glovebox run record v1"))
	return ed25519.NewKeyFromSeed(m.Sum(nil))
}

// RunPublicKey is the public half of RunSigningKey(boxKey), in standard
// base64, as the manifest's runs.public_key holds it.
func RunPublicKey(boxKey string) string {
	return base64.StdEncoding.EncodeToString(RunSigningKey(boxKey).Public().(ed25519.PublicKey))
}

// ParseRunPublicKey reads a runs.public_key.
func ParseRunPublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("run records' public key %.60q is not a base64 ed25519 public key (%d bytes)", s, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// RunChainStart is the prev of a session's first record.
func RunChainStart(session string) string {
	sum := sha256.Sum256([]byte("glovebox run chain v1\x00" + session))
	return hex.EncodeToString(sum[:])
}

// RunTime formats a record's times.
func RunTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// SignRun encodes r, digests its fields and signs them with key.
func SignRun(key ed25519.PrivateKey, r *RunRecord) (*SignedRun, error) {
	raw, err := marshal(r)
	if err != nil {
		return nil, fmt.Errorf("sign run record: %w", err)
	}
	digests, err := runFieldDigests(raw)
	if err != nil {
		return nil, fmt.Errorf("sign run record: %w", err)
	}
	signed := canonicalDigests(digests)
	sum := sha256.Sum256(signed)
	return &SignedRun{
		signed:    signed,
		Record:    raw,
		Digests:   digests,
		Digest:    hex.EncodeToString(sum[:]),
		PublicKey: base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, append([]byte(RunSignContext), signed...))),
	}, nil
}

// Encode is the signed record's JSON, as GET /runs/{prompt} answers it:
// json.Marshal's, without re-encoding the record.
func (s *SignedRun) Encode() []byte {
	b := make([]byte, 0, len(s.Record)+len(s.Digests)*100+256)
	b = append(append(b, `{"record":`...), s.Record...)
	signed := s.signed
	if signed == nil {
		signed = canonicalDigests(s.Digests)
	}
	b = append(append(b, `,"digests":`...), signed...)
	for _, f := range [...]struct{ k, v string }{{"digest", s.Digest}, {"public_key", s.PublicKey}, {"signature", s.Signature}} {
		b = append(append(append(b, ',', '"'), f.k...), '"', ':')
		b = appendCanonicalString(b, f.v)
	}
	return append(b, '}')
}

// DecodeSignedRun decodes one signed record as GET /runs/{prompt} answers
// it. It checks the shape only; Verify checks the rest.
func DecodeSignedRun(data []byte) (*SignedRun, error) {
	var s SignedRun
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	if len(s.Record) == 0 || s.Record[0] != '{' {
		return nil, errors.New("run record: no \"record\" object")
	}
	return &s, nil
}

// Run decodes the record.
func (s *SignedRun) Run() (*RunRecord, error) {
	var r RunRecord
	if err := json.Unmarshal(s.Record, &r); err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	return &r, nil
}
