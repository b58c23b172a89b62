package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestDecodeTermControl(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr string
	}{
		{`{"type":"resize","cols":120,"rows":40}`, ""},
		{`{"type":"signal","signal":"SIGINT"}`, ""},
		{`{"type":"signal","signal":"term","later":1}`, ""},
		{`{"type":"resize","cols":0,"rows":40}`, "resize needs cols and rows"},
		{`{"type":"resize","cols":10001,"rows":40}`, "resize needs cols and rows"},
		{`{"type":"signal","signal":"SIGSEGV"}`, `signal "SIGSEGV" is not one of`},
		{`{"type":"exit"}`, `"exit" is not resize or signal`},
		{`[1]`, "not a JSON object"},
		{strings.Repeat(" ", 5000), "at most 4096"},
	} {
		_, err := protocol.DecodeTermControl([]byte(tc.in))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("DecodeTermControl(%.40q) = %v, want no error", tc.in, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("DecodeTermControl(%.40q) = %v, want an error with %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestDecodeProcessRequest(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr string
	}{
		{`{"command":["sh","-c","echo hi"],"env":{"A_1":"x"},"dir":"sub"}`, ""},
		{`{}`, "needs a command"},
		{`{"command":[""]}`, "program is empty"},
		{`{"command":["a\u0000b"]}`, "NUL"},
		{`{"command":["sh"],"env":{"A=B":"x"}}`, `name "A=B"`},
		{`{"command":["sh"],"env":{"A":"x\u0000"}}`, "NUL"},
		{`{"command":"sh"}`, "not a process request"},
	} {
		_, err := protocol.DecodeProcessRequest([]byte(tc.in))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("DecodeProcessRequest(%q) = %v, want no error", tc.in, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("DecodeProcessRequest(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
		}
	}
	if _, err := protocol.DecodeTerminalRequest(nil); err != nil {
		t.Errorf("DecodeTerminalRequest(empty) = %v, want the default shell", err)
	}
}

// FuzzExecDecoders: any bytes give a checked request or an ErrBadExec,
// never a panic.
func FuzzExecDecoders(f *testing.F) {
	for _, s := range []string{
		`{"type":"resize","cols":120,"rows":40}`, `{"type":"signal","signal":"INT"}`,
		`{"command":["sh","-c","x"],"env":{"A":"b"},"dir":"/work"}`, `{"cols":-1}`,
		`{"command":[null]}`, `null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for name, decode := range map[string]func([]byte) error{
			"DecodeTermControl":     func(b []byte) error { _, err := protocol.DecodeTermControl(b); return err },
			"DecodeTerminalRequest": func(b []byte) error { _, err := protocol.DecodeTerminalRequest(b); return err },
			"DecodeProcessRequest":  func(b []byte) error { _, err := protocol.DecodeProcessRequest(b); return err },
		} {
			if err := decode(in); err != nil && !errors.Is(err, protocol.ErrBadExec) {
				t.Fatalf("%s(%q) = %v, want ErrBadExec", name, in, err)
			}
		}
		if c, err := protocol.DecodeTermControl(in); err == nil && c.Type == protocol.TermResize && (c.Cols < 1 || c.Rows < 1 || c.Cols > protocol.MaxTermSize || c.Rows > protocol.MaxTermSize) {
			t.Fatalf("DecodeTermControl(%q) accepted a size %dx%d", in, c.Cols, c.Rows)
		}
	})
}
