package protocol_test

import (
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

// BenchmarkDecodeClient measures decoding the frames a kit reads most.
func BenchmarkDecodeClient(b *testing.B) {
	for _, bc := range []struct{ name, frame string }{
		{"prompt", `{"type":"prompt","id":"req_1","text":"Extract the text from this PDF."}`},
		{"prompt-inputs", `{"type":"prompt","id":"req_1","text":"Extract the text.","inputs":{"sample.pdf":{"kind":"inline","name":"sample.pdf","mime":"application/pdf","data":"JVBERi0xLjQK"},"ref.csv":{"kind":"url","name":"ref.csv","mime":"text/csv","url":"https://example.com/ref.csv"}},"outputs_policy":{"inline_below":"256KB"}}`},
		{"ping", `{"type":"ping","ts":1732180535000}`},
		{"display_resolve", `{"type":"display_resolve","slot_id":"slot_1","value":{"optionId":"allow"}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			frame := []byte(bc.frame)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protocol.DecodeClient(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeLargePrompt measures what decoding a prompt of 20 MiB
// allocates beyond its frame (B/op over the frame's size is the number of
// copies made): in its text, and in one inline input.
func BenchmarkDecodeLargePrompt(b *testing.B) {
	big := strings.Repeat("a", 20<<20)
	for _, bc := range []struct{ name, frame string }{
		{"text", `{"type":"prompt","id":"p","text":"echo ` + big + `"}`},
		{"inline-input", `{"type":"prompt","id":"p","text":"wc -c in","inputs":{"in":{"kind":"inline","name":"in","mime":"text/plain","data":"` + big + `"}}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			frame := []byte(bc.frame)
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, err := protocol.DecodeClient(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeServer measures decoding the frames a client reads most.
func BenchmarkDecodeServer(b *testing.B) {
	for _, bc := range []struct{ name, frame string }{
		{"event", `{"type":"event","id":"req_1","event_type":"text_delta","data":{"text":"Hel"},"seq":12}`},
		{"complete", `{"type":"complete","id":"req_1","message":"Extracted 12 pages.","outputs":{"small.txt":{"kind":"inline","name":"small.txt","mime":"text/plain","data":"aGkgdGhlcmU="}},"seq":13}`},
		{"pong", `{"type":"pong","ts":1732180535000}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			frame := []byte(bc.frame)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := protocol.DecodeServer(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
