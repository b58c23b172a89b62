package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// exampleBox serves a real box in process for the examples, with its
// directories in a temporary root. A real host app would dial a deployed
// box instead.
func exampleBox(ag agent.Agent) (url, key string, stop func()) {
	root, err := os.MkdirTemp("", "example-box-")
	if err != nil {
		log.Fatal(err)
	}
	key = protocol.NewKey()
	m, _ := protocol.ParseManifest([]byte(`{"name": "media", "version": "0.1.0"}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := kit.New(kit.Options{Manifest: m, Key: key, Root: root, Agent: ag,
		PublicURL: "http://" + ln.Addr().String(), Getenv: func(string) string { return "" }})
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(context.Background(), ln)
	return "ws://" + ln.Addr().String() + "/", key, func() {
		srv.Close(context.Background())
		os.RemoveAll(root)
	}
}

func ExampleClient() {
	url, key, stop := exampleBox(exec.New())
	defer stop()

	c, err := client.New(map[string]client.Endpoint{
		"media": {URL: url, Key: key}, // e.g. wss://media.example.com/ and os.Getenv("MEDIA_KEY")
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // every wait has a deadline
	defer cancel()
	box, err := c.Box("media") // no socket yet: it opens on the first prompt
	if err != nil {
		log.Fatal(err)
	}
	env, err := box.Environment(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(env.Name, env.Version, "protocol", env.ProtocolVersion)

	r, err := box.Prompt(ctx, "echo hello from the box", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		log.Fatal(err)
	}
	done, err := r.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(done.Message)
	// Output:
	// media 0.1.0 protocol 1
	// hello from the box
}

func ExampleBox_Prompt() {
	url, key, stop := exampleBox(exec.New())
	defer stop()
	c, _ := client.New(map[string]client.Endpoint{"media": {URL: url, Key: key}})
	defer c.Close()
	box, _ := c.Box("media")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // every wait has a deadline
	defer cancel()

	// The exec agent runs the prompt as a shell command; input files land
	// in $GLOVEBOX_INPUT and files written to $GLOVEBOX_OUTPUT come back.
	r, err := box.Prompt(ctx, `tr a-z A-Z < "$GLOVEBOX_INPUT/note.txt" | tee "$GLOVEBOX_OUTPUT/loud.txt"`,
		client.PromptOptions{Files: map[string]client.File{"note.txt": {Data: []byte("quiet words\n")}}})
	if err != nil {
		log.Fatal(err)
	}
	for e := range r.Events(ctx) {
		switch e.Type {
		case "text_delta":
			var d struct{ Text string }
			json.Unmarshal(e.Data, &d)
			fmt.Printf("streamed: %q\n", d.Text)
		case "exit":
			fmt.Printf("exit: %s\n", e.Data)
		}
	}
	done, err := r.Wait(ctx)
	if err != nil {
		log.Fatal(err) // a failure the box reports is a *client.Error with its code
	}
	fmt.Printf("output loud.txt is %s\n", done.Outputs["loud.txt"].Kind)
	rc, err := r.Read(ctx, "loud.txt")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	fmt.Printf("read: %q\n", data)
	// Output:
	// streamed: "QUIET WORDS\n"
	// exit: {"code":0}
	// output loud.txt is inline
	// read: "QUIET WORDS\n"
}

func ExampleResult_Display() {
	// A Go agent that asks before it acts.
	asker := agent.Func(func(ctx context.Context, t agent.Turn) (string, error) {
		v, err := t.Ask(ctx, "confirm", map[string]string{"question": "delete " + t.Text() + "?"})
		if err != nil {
			return "kept " + t.Text(), nil
		}
		return "answer was " + string(v), nil
	})
	url, key, stop := exampleBox(asker)
	defer stop()
	c, _ := client.New(map[string]client.Endpoint{"media": {URL: url, Key: key}})
	defer c.Close()
	box, _ := c.Box("media")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // every wait has a deadline
	defer cancel()

	r, err := box.Prompt(ctx, "old.mp4", client.PromptOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for d := range r.Display(ctx) {
		if d.Kind == client.DisplayPush {
			fmt.Printf("slot %s: %s\n", d.Slot.Renderer, d.Slot.Input)
			r.Resolve(ctx, d.SlotID, true)
		}
	}
	done, _ := r.Wait(ctx)
	fmt.Println(done.Message)
	// Output:
	// slot confirm: {"question":"delete old.mp4?"}
	// answer was true
}

func ExampleBox_FS() {
	url, key, stop := exampleBox(exec.New())
	defer stop()
	c, _ := client.New(map[string]client.Endpoint{"media": {URL: url, Key: key}})
	defer c.Close()
	box, _ := c.Box("media")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // every wait has a deadline
	defer cancel()
	r, err := box.Prompt(ctx, "mkdir notes", client.PromptOptions{DiscardEvents: true}) // the session, opened
	if err != nil {
		log.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		log.Fatal(err)
	}

	fs := box.FS("") // this Box's session; another id for another session
	if _, err := fs.Write(ctx, "work/notes/a.txt", strings.NewReader("written by the client\n"), client.WriteOptions{Size: -1}); err != nil {
		log.Fatal(err)
	}
	for e, err := range fs.ListAll(ctx, "work/notes") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Path, e.Type, e.Size)
	}
	rc, err := fs.Open(ctx, "work/notes/a.txt", 8, 6) // bytes 8 to 13
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	part, _ := io.ReadAll(rc)
	fmt.Printf("%s\n", part)
	_, err = fs.Open(ctx, "work/../etc/passwd", 0, -1)
	fmt.Println(err)
	// Output:
	// work/notes/a.txt file 22
	// by the
	// file path "work/../etc/passwd": a ".." name: give the path from the work directory down, without . or ..
}

func ExampleBox_StartProcess() {
	url, key, stop := exampleBox(exec.New())
	defer stop()
	c, _ := client.New(map[string]client.Endpoint{"media": {URL: url, Key: key}})
	defer c.Close()
	box, _ := c.Box("media")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A process lives in a session: this Box's own, opened here, or one
	// that Sessions lists. It ends with the session.
	session, err := box.Connect(ctx)
	if err != nil {
		log.Fatal(err)
	}
	p, err := box.StartProcess(ctx, session, protocol.ProcessRequest{Command: []string{"sh", "-c", "while read l; do echo \"got $l\"; done"}})
	if err != nil {
		log.Fatal(err)
	}
	if err := box.WriteStdin(ctx, session, p.ID, strings.NewReader("one\ntwo\n"), true); err != nil {
		log.Fatal(err)
	}
	for page, err := range box.ProcessOutput(ctx, session, p.ID, client.OutputOptions{Follow: true}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s", page.Bytes)
		if page.EOF {
			fmt.Printf("exit %d\n", page.Exit.Code)
		}
	}
	// Output:
	// got one
	// got two
	// exit 0
}
