package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

var promptCommand = command{
	name:    "prompt",
	summary: "send a prompt to a box and stream what it does",
	run:     runPrompt,
}

type promptFlags struct {
	box         boxFlags
	files       []string
	inputURLs   []string
	asJSON      bool
	resolve     []string
	rejectAll   bool
	out         string
	consume     bool
	timeout     time.Duration
	inlineBelow string
	serverTTL   string
	session     string
}

func runPrompt(ctx context.Context, stdio IO, args []string) error {
	var f promptFlags
	fs := newFlags(stdio, "prompt", "prompt [flags] TEXT...\n\nSends TEXT (or stdin, when no TEXT is given and stdin is not a terminal) to a box,\nstreams its events, answers its display slots and saves its outputs.\nExits 1 when the prompt fails, and with the remote command's status when the\nagent reports a non-zero one."+"\n"+endpointsHelp)
	f.box.register(fs)
	fs.StringArrayVarP(&f.files, "file", "f", nil, "attach a file as an input: PATH or NAME=PATH (repeatable)")
	fs.StringArrayVar(&f.inputURLs, "input-url", nil, "an input the box fetches itself: NAME=URL (http or https; for files too big to send; repeatable)")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object per line (wire frames) instead of text")
	fs.StringVar(&f.session, "session", "", "send the prompt to session ID, restored or forked and waiting (gbx restore, gbx fork), instead of a new one")
	fs.StringArrayVar(&f.resolve, "resolve", nil, "answer display slots of RENDERER with VALUE (JSON, or else a string): RENDERER=VALUE, * for any (repeatable)")
	fs.BoolVar(&f.rejectAll, "reject-all", false, "reject every display slot that --resolve does not answer")
	fs.StringVarP(&f.out, "out", "o", "", "save the outputs into DIR")
	fs.BoolVar(&f.consume, "consume", false, "with -o, delete server-stored outputs on the box once saved")
	fs.DurationVar(&f.timeout, "timeout", 0, "abort the prompt after this long (e.g. 5m); 0 waits for as long as it takes")
	fs.StringVar(&f.inlineBelow, "inline-below", "", "outputs policy: return outputs smaller than SIZE inline (e.g. 256KB)")
	fs.StringVar(&f.serverTTL, "server-ttl", "", "outputs policy: keep server-stored outputs this long (e.g. 24h)")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	text := strings.Join(fs.Args(), " ")
	if fs.NArg() == 0 || text == "-" {
		if isTerminal(stdio.Stdin) || stdio.Stdin == nil {
			return fmt.Errorf("%w: gbx prompt needs TEXT (or the text on stdin)", ErrUsage)
		}
		data, err := io.ReadAll(io.LimitReader(stdio.Stdin, 64<<20))
		if err != nil {
			return fmt.Errorf("read prompt from stdin: %w", err)
		}
		text = string(data)
	}
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("%w: the prompt is empty", ErrUsage)
	}
	answers, err := parseAnswers(f.resolve)
	if err != nil {
		return err
	}
	opts := client.PromptOptions{}
	var big []bigInput
	if opts.Files, big, err = readInputFiles(stdio, f.files); err != nil {
		return err
	}
	if opts.Inputs, err = inputURLs(f.inputURLs, opts.Files); err != nil {
		return err
	}
	for _, in := range big {
		if _, dup := opts.Inputs[in.name]; dup {
			return fmt.Errorf("%w: input %s is given twice (--file and --input-url)", ErrUsage, in.name)
		}
	}
	if f.inlineBelow != "" || f.serverTTL != "" {
		opts.OutputsPolicy = &protocol.OutputsOverride{InlineBelow: f.inlineBelow, ServerTTL: f.serverTTL}
		if err := opts.OutputsPolicy.Check(); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	c, b, err := f.box.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	if f.session != "" {
		if err := b.Attach(f.session); err != nil {
			return err
		}
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, f.timeout, fmt.Errorf("prompt timed out after %s", f.timeout))
		defer cancel()
	}
	uploaded, err := uploadInputs(ctx, stdio, b, big)
	if err != nil {
		return err
	}
	for name, ref := range uploaded {
		if opts.Inputs == nil {
			opts.Inputs = make(map[string]protocol.FileRef, len(uploaded))
		}
		opts.Inputs[name] = ref
	}
	p := &promptRun{stdio: stdio, asJSON: f.asJSON, answers: answers, rejectAll: f.rejectAll,
		interactive: isTerminal(stdio.Stdin)}
	return p.run(ctx, b, text, opts, f)
}

// promptRun prints one prompt's progress. Its writes are serialised: the
// event and display streams are read on two goroutines.
type promptRun struct {
	stdio       IO
	asJSON      bool
	answers     map[string]json.RawMessage
	rejectAll   bool
	interactive bool

	mu       sync.Mutex
	midLine  bool // stdout text so far does not end in a newline
	streamed bool // some text was streamed
	exitCode *int
	lines    chan string // lines typed on the terminal, once asked
}

func (p *promptRun) run(ctx context.Context, b *client.Box, text string, opts client.PromptOptions, f promptFlags) error {
	r, err := b.Prompt(ctx, text, opts)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for d := range r.Display(ctx) {
			p.display(ctx, r, d)
		}
	})
	for e := range r.Events(ctx) {
		p.event(r.ID(), e)
	}
	wg.Wait()
	done, err := r.Wait(context.WithoutCancel(ctx))
	if err != nil {
		return p.failed(ctx, r.ID(), err)
	}
	p.endLine()
	if p.asJSON {
		p.jsonLine(&protocol.Complete{ID: r.ID(), Message: done.Message, Outputs: done.Outputs})
	} else if !p.streamed && done.Message != "" {
		fmt.Fprintln(p.stdio.Stdout, strings.TrimRight(done.Message, "\n"))
	}
	if err := p.outputs(ctx, r, done.Outputs, f.out, f.consume); err != nil {
		return err
	}
	if p.exitCode != nil && *p.exitCode != 0 {
		if !p.asJSON {
			fmt.Fprintf(p.stdio.Stderr, "exit status %d\n", *p.exitCode)
		}
		return &ExitError{Code: *p.exitCode}
	}
	return nil
}

func (p *promptRun) failed(ctx context.Context, id string, err error) error {
	p.endLine()
	var be *client.Error
	if p.asJSON {
		body := protocol.ErrorBody{Code: "ClientError", Message: err.Error()}
		if errors.As(err, &be) {
			body = protocol.ErrorBody{Code: be.Code, Message: be.Message}
		}
		p.jsonLine(&protocol.Error{ID: id, Error: body})
	}
	if ctx.Err() != nil {
		// 130 for Ctrl-C as shells report it, 124 for --timeout as
		// timeout(1) does.
		why, code := context.Cause(ctx).Error(), 124
		if errors.Is(context.Cause(ctx), context.Canceled) {
			why, code = "interrupted", 130
		}
		if !p.asJSON {
			fmt.Fprintf(p.stdio.Stderr, "gbx: %s; the prompt was aborted\n", why)
		}
		return &ExitError{Code: code}
	}
	if p.asJSON {
		return &ExitError{Code: 1}
	}
	return err
}

// event prints one event as a person wants to read it.
func (p *promptRun) event(id string, e client.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Type == "exit" {
		var x struct {
			Code *int `json:"code"`
		}
		if json.Unmarshal(e.Data, &x) == nil && x.Code != nil {
			p.exitCode = x.Code
		}
	}
	if p.asJSON {
		p.jsonLineLocked(&protocol.Event{ID: id, EventType: e.Type, Data: e.Data, Seq: e.Seq})
		return
	}
	switch e.Type {
	case "text_delta":
		var d struct {
			Text   string `json:"text"`
			Stream string `json:"stream"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			return
		}
		if d.Stream == "stderr" {
			p.endLineLocked()
			io.WriteString(p.stdio.Stderr, d.Text)
			return
		}
		if d.Text != "" {
			io.WriteString(p.stdio.Stdout, d.Text)
			p.midLine = !strings.HasSuffix(d.Text, "\n")
			p.streamed = true
		}
	case "exit", "model_response", "model_response_complete", "token_consumption":
		// exit is reported at the end; model responses repeat the text.
	case "tool_use":
		var d struct {
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		json.Unmarshal(e.Data, &d)
		p.statusLocked("⚙ %s %s", d.Name, clip(string(d.Input), 120))
	case "tool_use_result":
		var d struct {
			Name   string `json:"tool_name"`
			Result struct {
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"result"`
		}
		json.Unmarshal(e.Data, &d)
		p.statusLocked("⚙ %s → %s %s", d.Name, d.Result.Status, clip(d.Result.Message, 120))
	default:
		p.statusLocked("· %s %s", e.Type, clip(string(e.Data), 160))
	}
}

func (p *promptRun) statusLocked(format string, args ...any) {
	p.endLineLocked()
	io.WriteString(p.stdio.Stderr, strings.TrimRight(fmt.Sprintf(format, args...), " ")+"\n")
}

func (p *promptRun) endLine() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLineLocked()
}

func (p *promptRun) endLineLocked() {
	if p.midLine && !p.asJSON {
		io.WriteString(p.stdio.Stdout, "\n")
		p.midLine = false
	}
}

func (p *promptRun) jsonLine(m any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jsonLineLocked(m)
}

func (p *promptRun) jsonLineLocked(m any) {
	var data []byte
	var err error
	if _, ok := m.(protocol.ServerMessage); ok {
		data, err = protocol.Encode(m)
	} else {
		data, err = json.Marshal(m)
	}
	if err != nil {
		fmt.Fprintf(p.stdio.Stderr, "gbx: encode: %v\n", err)
		return
	}
	p.stdio.Stdout.Write(append(data, '\n'))
}

// display shows a display update and answers pushed slots: by --resolve,
// by --reject-all, by asking on a terminal, or else by rejecting them so
// that the agent is never left waiting for nobody.
func (p *promptRun) display(ctx context.Context, r *client.Result, d client.DisplayEvent) {
	if p.asJSON {
		if d.Kind == client.DisplayPush {
			p.jsonLine(&protocol.DisplayPush{Slot: d.Slot, PromptID: r.ID()})
		} else {
			p.jsonLine(&protocol.DisplayClear{SlotID: d.SlotID, PromptID: r.ID()})
		}
	}
	if d.Kind != client.DisplayPush {
		return
	}
	slot := d.Slot
	value, ok := p.answers[slot.Renderer]
	if !ok {
		value, ok = p.answers["*"]
	}
	var err error
	switch {
	case ok:
		p.note("? %s %s → %s (--resolve)", slot.Renderer, clip(string(slot.Input), 120), value)
		err = r.Resolve(ctx, slot.ID, value)
	case p.rejectAll:
		p.note("? %s %s → rejected (--reject-all)", slot.Renderer, clip(string(slot.Input), 120))
		err = r.Reject(ctx, slot.ID, "rejected by gbx --reject-all")
	case p.interactive:
		err = p.ask(ctx, r, slot)
	default:
		p.note("? %s %s → rejected: no answer given (use --resolve %s=VALUE)", slot.Renderer, clip(string(slot.Input), 120), slot.Renderer)
		err = r.Reject(ctx, slot.ID, "no answer: gbx prompt is not interactive and no --resolve matched")
	}
	if err != nil {
		p.note("gbx: answer slot %s: %v", slot.ID, err)
	}
}

func (p *promptRun) note(format string, args ...any) {
	if p.asJSON {
		fmt.Fprintf(p.stdio.Stderr, format+"\n", args...)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statusLocked(format, args...)
}

// ask asks on the terminal. A confirm or permission slot takes y or n;
// anything else takes JSON or text; an empty line rejects. If the prompt
// ends before an answer comes, ask gives up on the question.
func (p *promptRun) ask(ctx context.Context, r *client.Result, slot protocol.Slot) error {
	yesNo := slot.Renderer == "confirm" || slot.Renderer == "permission_request"
	hint := "answer (JSON or text; empty line rejects)"
	if yesNo {
		hint = "[y/n]"
	}
	p.mu.Lock()
	p.endLineLocked()
	fmt.Fprintf(p.stdio.Stderr, "? %s %s\n  %s: ", slot.Renderer, clip(string(slot.Input), 400), hint)
	if p.lines == nil {
		// One reader for the whole run. It may outlive the prompt,
		// blocked on the terminal, until gbx exits.
		p.lines = make(chan string)
		go func(in *bufio.Reader, out chan<- string) {
			defer close(out)
			for {
				line, err := in.ReadString('\n')
				if line != "" || err == nil {
					out <- line
				}
				if err != nil {
					return
				}
			}
		}(bufio.NewReader(p.stdio.Stdin), p.lines)
	}
	lines := p.lines
	p.mu.Unlock()
	var line string
	select {
	case l, ok := <-lines:
		if !ok {
			return r.Reject(ctx, slot.ID, "no answer: stdin closed")
		}
		line = strings.TrimSpace(l)
	case <-r.Done():
		return nil
	case <-ctx.Done():
		return nil
	}
	if yesNo {
		switch strings.ToLower(line) {
		case "y", "yes":
			return r.Resolve(ctx, slot.ID, true)
		case "n", "no", "":
			return r.Reject(ctx, slot.ID, "declined")
		}
	}
	if line == "" {
		return r.Reject(ctx, slot.ID, "declined")
	}
	return r.Resolve(ctx, slot.ID, answerValue(line))
}

func parseAnswers(specs []string) (map[string]json.RawMessage, error) {
	answers := map[string]json.RawMessage{}
	for _, s := range specs {
		renderer, value, ok := strings.Cut(s, "=")
		if !ok || renderer == "" {
			return nil, fmt.Errorf("%w: --resolve %q: want RENDERER=VALUE (e.g. confirm=true)", ErrUsage, s)
		}
		answers[renderer] = answerValue(value)
	}
	return answers, nil
}

// answerValue is s as JSON when it is JSON, else s as a JSON string.
func answerValue(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func readInputFiles(stdio IO, specs []string) (map[string]client.File, []bigInput, error) {
	if len(specs) == 0 {
		return nil, nil, nil
	}
	files := map[string]client.File{}
	var big []bigInput
	taken := map[string]bool{}
	for _, s := range specs {
		name, p, ok := strings.Cut(s, "=")
		if !ok {
			p, name = s, filepath.Base(s)
		}
		if name == "" || p == "" {
			return nil, nil, fmt.Errorf("%w: --file %q: want PATH or NAME=PATH", ErrUsage, s)
		}
		if taken[name] {
			return nil, nil, fmt.Errorf("%w: two --file inputs named %q: use NAME=PATH", ErrUsage, name)
		}
		taken[name] = true
		path := absPath(stdio, p)
		st, err := os.Stat(path)
		if err != nil {
			return nil, nil, fmt.Errorf("--file %s: %w", s, err)
		}
		if st.Mode().IsRegular() && st.Size() > uploadAbove {
			big = append(big, bigInput{name: name, path: path, size: st.Size()})
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("--file %s: %w", s, err)
		}
		files[name] = client.File{Data: data}
	}
	return files, big, nil
}

// inputURLs turns --input-url NAME=URL flags into url refs.
func inputURLs(specs []string, files map[string]client.File) (map[string]protocol.FileRef, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	refs := map[string]protocol.FileRef{}
	for _, s := range specs {
		name, raw, ok := strings.Cut(s, "=")
		if !ok || name == "" || raw == "" {
			return nil, fmt.Errorf("%w: --input-url %q: want NAME=URL", ErrUsage, s)
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: --input-url %s: %q is not an http or https URL", ErrUsage, name, raw)
		}
		_, dupFile := files[name]
		if _, dup := refs[name]; dup || dupFile {
			return nil, fmt.Errorf("%w: two inputs named %q", ErrUsage, name)
		}
		ref := protocol.FileRef{Kind: protocol.KindURL, Name: name, Mime: protocol.GuessMime(name), URL: raw}
		if err := ref.Validate(); err != nil {
			return nil, fmt.Errorf("%w: --input-url %s: %v", ErrUsage, name, err)
		}
		refs[name] = ref
	}
	return refs, nil
}

// outputs lists the outputs and, with dir, saves them there.
func (p *promptRun) outputs(ctx context.Context, r *client.Result, outs map[string]protocol.FileRef, dir string, consume bool) error {
	names := slices.Sorted(maps.Keys(outs))
	if len(names) > 0 && !p.asJSON {
		fmt.Fprintf(p.stdio.Stderr, "outputs:\n")
	}
	var errs []error
	for _, name := range names {
		ref := outs[name]
		size := refSize(ref)
		where := ""
		if dir != "" {
			dest, err := outputPath(absPath(p.stdio, dir), name)
			if err == nil {
				err = p.save(ctx, r, name, dest, size, consume)
			}
			if err != nil {
				errs = append(errs, err)
				where = "not saved: " + err.Error()
			} else {
				where = "saved to " + dest
				if p.asJSON {
					p.jsonLine(map[string]any{"type": "saved", "name": name, "path": dest, "size": size})
				}
			}
		} else if ref.Kind == protocol.KindServer {
			where = "gbx files get " + ref.ID
		}
		if !p.asJSON {
			fmt.Fprintf(p.stdio.Stderr, "  %-24s %-7s %10s  %s\n", name, ref.Kind, humanSize(size), where)
		}
	}
	if len(names) > 0 && dir == "" && !p.asJSON {
		fmt.Fprintf(p.stdio.Stderr, "  (pass -o DIR to save them)\n")
	}
	return errors.Join(errs...)
}

func (p *promptRun) save(ctx context.Context, r *client.Result, name, dest string, size int64, consume bool) error {
	var opts []client.ReadOption
	if consume {
		opts = append(opts, client.Consume())
	}
	rc, err := r.Read(ctx, name, opts...)
	if err != nil {
		return err
	}
	defer rc.Close()
	bar := newProgress(p.stdio, "download "+name, size)
	_, err = saveFile(dest, bar.reader(rc))
	bar.done()
	return err
}

// outputPath is where output name goes under dir. Names are slash paths
// chosen by the box; one that would leave dir is refused.
func outputPath(dir, name string) (string, error) {
	clean := path.Clean("/" + name)[1:]
	if clean == "" || clean != name || strings.Contains(name, "\\") {
		return "", fmt.Errorf("output name %q is not a plain relative path; not saving it", name)
	}
	return filepath.Join(dir, filepath.FromSlash(clean)), nil
}

func refSize(ref protocol.FileRef) int64 {
	switch ref.Kind {
	case protocol.KindServer:
		return ref.Size
	case protocol.KindInline:
		if b, err := ref.Bytes(); err == nil {
			return int64(len(b))
		}
	}
	return 0
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
