package client_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The Go client opens a session, runs a terminal in it (input, output,
// resize, exit status) and a process (stdin, followed output, exit).
func TestKitTerminalAndProcess(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	ctx := testkit.Context(t, "the box's answers")
	sid, err := b.Connect(ctx)
	if err != nil || sid == "" {
		t.Fatalf("Connect = %q, %v", sid, err)
	}
	term, err := b.StartTerminal(ctx, sid, protocol.TerminalRequest{Command: []string{"/bin/sh"}, Cols: 90, Rows: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if err := term.Resize(120, 33); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(term, "stty size; exit 4\r"); err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(term); read <- b }()
	out := testkit.Recv(t, read, "the terminal's output to its end")
	if !strings.Contains(string(out), "33 120") {
		t.Errorf("the terminal printed %q, want the resized 33 120", out)
	}
	if e, err := term.Wait(ctx); err != nil || e.Code != 4 {
		t.Errorf("Wait = %+v, %v; want code 4", e, err)
	}
	list, err := b.Terminals(ctx, sid)
	if err != nil || len(list) != 1 || list[0].State != protocol.ExecExited {
		t.Errorf("Terminals = %+v, %v", list, err)
	}

	p, err := b.StartProcess(ctx, sid, protocol.ProcessRequest{Command: []string{"/bin/sh", "-c", "tr a-z A-Z; echo err >&2; exit 2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteStdin(ctx, sid, p.ID, strings.NewReader("shout\n"), true); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	var last client.OutputPage
	for page, err := range b.ProcessOutput(ctx, sid, p.ID, client.OutputOptions{Follow: true}) {
		if err != nil {
			t.Fatal(err)
		}
		got.Write(page.Bytes)
		last = page
	}
	if got.String() != "SHOUT\n" || !last.EOF || last.Exit == nil || last.Exit.Code != 2 {
		t.Errorf("followed %q, last %+v; want SHOUT and exit 2", got.String(), last.ProcessOutput)
	}
	for page, err := range b.ProcessOutput(ctx, sid, p.ID, client.OutputOptions{Stderr: true}) {
		if err != nil || string(page.Bytes) != "err\n" {
			t.Errorf("stderr = %q, %v", page.Bytes, err)
		}
	}
	if err := b.SignalProcess(ctx, sid, p.ID, "SIGBOGUS"); err == nil || !strings.Contains(err.Error(), "SIGBOGUS") {
		t.Errorf("SignalProcess(SIGBOGUS) = %v, want the box's refusal", err)
	}
	if err := b.DeleteProcess(ctx, sid, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Process(ctx, sid, p.ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Process after delete = %v, want a 404", err)
	}
}

// A large paste goes to the box in frames it takes.
func TestKitTerminalLargeInput(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	ctx := testkit.Context(t, "the box's answers")
	sid, err := b.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	term, err := b.StartTerminal(ctx, sid, protocol.TerminalRequest{Command: []string{"/bin/sh", "-c", "stty raw -echo; echo ready; head -c 200000 | wc -c"}})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	chunks := make(chan []byte, 64)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 4096)
			n, err := term.Read(buf)
			if n > 0 {
				chunks <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	var out bytes.Buffer
	until := func(want string) {
		t.Helper()
		for !strings.Contains(out.String(), want) {
			c, ok := testkit.Next(t, chunks, "the terminal to print "+want)
			if !ok {
				t.Fatalf("the terminal closed before it printed %q; it printed %q", want, out.String())
			}
			out.Write(c)
		}
	}
	until("ready") // raw mode, no echo: the paste is read as it is
	if n, err := term.Write(bytes.Repeat([]byte("z"), 200000)); err != nil || n != 200000 {
		t.Fatalf("Write = %d, %v", n, err)
	}
	until("200000")
	if e, err := term.Wait(ctx); err != nil || e.Code != 0 {
		t.Errorf("Wait = %+v, %v", e, err)
	}
}
