package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testRun(session string, seq int64, prev string) *RunRecord {
	code := int64(0)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	return &RunRecord{
		V: RunRecordVersion, ManifestDigest: strings.Repeat("ab", 32), Session: session, Seq: seq, Prev: prev,
		Prompt: "p" + string(rune('0'+seq)), PromptDigest: strings.Repeat("cd", 32), Agent: "exec",
		Inputs:  map[string]RunFile{"in.txt": {SHA256: strings.Repeat("01", 32), Size: 3}},
		Outputs: map[string]RunFile{"out/report.pdf": {SHA256: strings.Repeat("02", 32), Size: 9}},
		Egress:  []RunEgressDecision{{Seq: 4, Time: RunTime(t0), Proto: "connect", Host: "example.com", Port: 443, Decision: "deny", Rule: "default"}},
		Outcome: "complete", ExitCode: &code, Started: RunTime(t0), Ended: RunTime(t0.Add(time.Second)), DurationMS: 1000,
	}
}

// chain signs n records of one session with key.
func testChain(t *testing.T, key string, n int) []SignedRun {
	t.Helper()
	priv := RunSigningKey(key)
	prev := RunChainStart("s1")
	var out []SignedRun
	for i := 1; i <= n; i++ {
		s, err := SignRun(priv, testRun("s1", int64(i), prev))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *s)
		prev = s.Digest
	}
	return out
}

func testPub(t *testing.T, key string) []byte {
	t.Helper()
	pub, err := ParseRunPublicKey(RunPublicKey(key))
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func TestRunRecordVerifies(t *testing.T) {
	t.Parallel()
	recs := testChain(t, "box-key", 3)
	if err := VerifyRunChain(testPub(t, "box-key"), recs); err != nil {
		t.Fatalf("VerifyRunChain = %v, want nil", err)
	}
	// Through its wire form too.
	b, _ := json.Marshal(recs[1])
	s, err := DecodeSignedRun(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(testPub(t, "box-key")); err != nil {
		t.Errorf("Verify after a JSON round trip = %v", err)
	}
	// Per-entry digests for the collections.
	for _, f := range []string{"inputs/in.txt", "outputs/out/report.pdf", "egress/0", "prompt_digest", "prev"} {
		if recs[0].Digests[f] == "" {
			t.Errorf("no digest for field %s in %v", f, recs[0].Digests)
		}
	}
}

// tamper rewrites one record's JSON through f.
func tamper(t *testing.T, s SignedRun, f func(m map[string]any)) SignedRun {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(s.Record, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	raw, _ := json.Marshal(m)
	s.Record = raw
	return s
}

func TestRunRecordTamperNamesField(t *testing.T) {
	t.Parallel()
	pub := testPub(t, "box-key")
	rec := testChain(t, "box-key", 1)[0]
	cases := []struct {
		name   string
		change func(m map[string]any)
		field  string
	}{
		{"output digest", func(m map[string]any) {
			m["outputs"].(map[string]any)["out/report.pdf"].(map[string]any)["sha256"] = strings.Repeat("03", 32)
		}, "outputs/out/report.pdf"},
		{"output added", func(m map[string]any) {
			m["outputs"].(map[string]any)["extra"] = map[string]any{"sha256": "00", "size": 1}
		}, "outputs/extra"},
		{"egress removed", func(m map[string]any) { delete(m, "egress") }, "egress/0"},
		{"outcome", func(m map[string]any) { m["outcome"] = "TimeoutError" }, "outcome"},
		{"text added", func(m map[string]any) { m["prompt_text"] = "hello" }, "prompt_text"},
		{"exit code", func(m map[string]any) { m["exit_code"] = 1 }, "exit_code"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := tamper(t, rec, c.change)
			err := s.Verify(pub)
			var ve *RunVerifyError
			if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0] != c.field {
				t.Fatalf("Verify = %v, want a RunVerifyError naming %s", err, c.field)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("Verify = %q, want the message to name %s", err, c.field)
			}
		})
	}
	t.Run("digests", func(t *testing.T) {
		s := rec
		s.Digests = map[string]string{}
		for k, v := range rec.Digests {
			s.Digests[k] = v
		}
		s.Digests["outcome"] = strings.Repeat("0", 64)
		if err := s.Verify(pub); err == nil || !strings.Contains(err.Error(), "digests were changed") {
			t.Errorf("Verify with a changed digest = %v, want the signature refused", err)
		}
	})
}

func TestRunRecordWrongKey(t *testing.T) {
	t.Parallel()
	rec := testChain(t, "box-key", 1)[0]
	err := rec.Verify(testPub(t, "another-box-key"))
	if err == nil || !strings.Contains(err.Error(), "another key") {
		t.Errorf("Verify with another box's key = %v, want a refusal naming the key", err)
	}
}

func TestRunChainBroken(t *testing.T) {
	t.Parallel()
	pub := testPub(t, "box-key")
	recs := testChain(t, "box-key", 4)
	cases := []struct {
		name string
		recs []SignedRun
		at   int
		want string
	}{
		{"dropped", []SignedRun{recs[0], recs[1], recs[3]}, 3, "missing"},
		{"reordered", []SignedRun{recs[0], recs[2], recs[1], recs[3]}, 2, "missing"},
		{"swapped back", []SignedRun{recs[0], recs[1], recs[3], recs[2]}, 3, "missing"},
		{"first dropped", recs[1:], 1, "does not start"},
		{"repeated", []SignedRun{recs[0], recs[1], recs[1]}, 3, "out of order"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyRunChain(pub, c.recs)
			var ce *RunChainError
			if !errors.As(err, &ce) || ce.At != c.at || !strings.Contains(err.Error(), c.want) {
				t.Errorf("VerifyRunChain = %v, want broken at %d (%s)", err, c.at, c.want)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"b":1, "a":[true,null,"x\u00e9<>&\u2028"]}`, `{"a":[true,null,"xé<>&` + "\u2028" + `"],"b":1}`},
		{`"\u0001\n\"\\/"`, `"\u0001\n\"\\/"`},
		{`{"é":1,"z":2,"A":3}`, `{"A":3,"z":2,"é":1}`},
		{`-9007199254740991`, `-9007199254740991`},
	}
	for _, c := range cases {
		got, err := Canonical([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonical(%s) = %s, %v, want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`1.5`, `9007199254740992`, `1e3`, `{`, `1 2`} {
		if got, err := Canonical([]byte(bad)); err == nil {
			t.Errorf("Canonical(%q) = %s, want an error", bad, got)
		}
	}
}

func FuzzRunRecordVerify(f *testing.F) {
	priv := RunSigningKey("k")
	s, _ := SignRun(priv, testRun("s", 1, RunChainStart("s")))
	good, _ := json.Marshal(s)
	f.Add(good)
	f.Add([]byte(`{"record":{"outputs":[1],"egress":{"a":1}},"digests":{},"signature":""}`))
	f.Add([]byte(`{"record":null}`))
	pub := priv.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSignedRun(data)
		if err != nil {
			return
		}
		if s.Verify(pub) == nil {
			if _, err := s.Run(); err != nil {
				t.Errorf("a verified record does not decode: %v", err)
			}
		}
		VerifyRunChain(pub, []SignedRun{*s, *s})
	})
}

func BenchmarkSignRun(b *testing.B) {
	priv := RunSigningKey("k")
	r := testRun("s", 1, RunChainStart("s"))
	for b.Loop() {
		if _, err := SignRun(priv, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyRun(b *testing.B) {
	priv := RunSigningKey("k")
	s, _ := SignRun(priv, testRun("s", 1, RunChainStart("s")))
	pub := priv.Public().(ed25519.PublicKey)
	for b.Loop() {
		if err := s.Verify(pub); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCanonicalScalar: the fast path for scalars gives what decoding and
// re-encoding gives, and declines what it would change.
func TestCanonicalScalar(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`"plain"`, `"é ` + "\u2028" + `"`, `"a\"b"`, `"\b"`, `"\u00e9"`, `"\/"`, `0`, `-12`, `12`, `007`, `-0`, `1e2`, `9007199254740992`, `true`, `null`, "\"\xff\""} {
		var v any
		d := json.NewDecoder(strings.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&v); err != nil || d.More() {
			if got, err := Canonical([]byte(raw)); err == nil {
				t.Errorf("Canonical(%s) = %s, want an error: not one JSON value", raw, got)
			}
			continue
		}
		full, ferr := appendCanonical(nil, v)
		got, err := Canonical([]byte(raw))
		if (err == nil) != (ferr == nil) || string(got) != string(full) {
			t.Errorf("Canonical(%s) = %s, %v; decoding and re-encoding gives %s, %v", raw, got, err, full, ferr)
		}
	}
}

func TestSignedRunEncode(t *testing.T) {
	t.Parallel()
	s := testChain(t, "k", 1)[0]
	want, _ := json.Marshal(s)
	var a, b any
	json.Unmarshal(want, &a)
	if err := json.Unmarshal(s.Encode(), &b); err != nil {
		t.Fatalf("Encode is not JSON: %v\n%s", err, s.Encode())
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("Encode = %s, want json.Marshal's %s", s.Encode(), want)
	}
}

// FuzzCanonical: what Canonical writes is canonical already, and it
// never panics.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":[1,"x\n"],"a":null}`, `"é"`, `-3`, `[{"z":true}]`} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":1,"a ":"x","b":null}`))
	f.Add([]byte(`{"a ":1,"a":2}`))
	f.Add([]byte(`{"a":1,}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonical(data)
		slow, serr := canonicalSlow(data)
		if (err == nil) != (serr == nil) || string(c) != string(slow) {
			t.Fatalf("Canonical(%q) = %q, %v; decoding and re-encoding gives %q, %v", data, c, err, slow, serr)
		}
		if err != nil {
			return
		}
		again, err := Canonical(c)
		if err != nil || string(again) != string(c) {
			t.Errorf("Canonical(%q) = %q, and again %q, %v", data, c, again, err)
		}
	})
}

// slowFieldDigests is runFieldDigests through encoding/json alone, which
// the compact splitting must agree with.
func slowFieldDigests(record []byte) (map[string]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(record, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errors.New("null")
	}
	out := map[string]string{}
	add := func(name string, raw []byte) error {
		c, err := canonicalSlow(raw)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(c)
		out[name] = hex.EncodeToString(sum[:])
		return nil
	}
	for k, v := range top {
		var m map[string]json.RawMessage
		var l []json.RawMessage
		var err error
		switch {
		case (k == "inputs" || k == "outputs") && json.Unmarshal(v, &m) == nil && m != nil:
			for name, mv := range m {
				if err = add(k+"/"+name, mv); err != nil {
					break
				}
			}
		case k == "egress" && json.Unmarshal(v, &l) == nil && l != nil:
			for i, lv := range l {
				if err = add(k+"/"+strconv.Itoa(i), lv); err != nil {
					break
				}
			}
		default:
			err = add(k, v)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// FuzzRunFieldDigests: splitting compact JSON by hand digests the same
// fields as encoding/json, and fails where it fails.
func FuzzRunFieldDigests(f *testing.F) {
	s, _ := SignRun(RunSigningKey("k"), testRun("s", 1, RunChainStart("s")))
	f.Add([]byte(s.Record))
	f.Add([]byte(`{"a":1,"a":2,"outputs":{"x":{"b":1,"a":[1,"]"]},"x":3}}`))
	f.Add([]byte(`{"egress":[{"z":1},"a\"b",[],{}],"inputs":{},"b" :1}`))
	f.Add([]byte(`{"k\u0041":1,"outputs":null,"egress":{"0":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := runFieldDigests(data)
		want, werr := slowFieldDigests(data)
		if (err == nil) != (werr == nil) || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("runFieldDigests(%q) = %v, %v; through encoding/json %v, %v", data, got, err, want, werr)
		}
	})
}
