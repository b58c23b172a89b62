package kit

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// A session's run records on disk: <state>/runs/<session>.jsonl, one line
// a record ({"owner": the identity that opened the session, "run": the
// signed record}), appended as records are kept, rewritten when old ones
// are dropped, reread when the kit starts again (runs.go).

// runFileLine is one line of a session's file.
type runFileLine struct {
	Owner string              `json:"owner"`
	Run   *protocol.SignedRun `json:"run"`
}

var safeSessionID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// file is the session's file; an id unfit for a file name is hex-encoded.
func (rr *runRecorder) file(id string) string {
	if !safeSessionID.MatchString(id) {
		id = "x" + hex.EncodeToString([]byte(id))
	}
	return filepath.Join(rr.dir, id+".jsonl")
}

// runLine is a record's line in its session's file (body is the signed
// record's JSON, already compact).
func runLine(owner string, body []byte) ([]byte, error) {
	o, err := json.Marshal(owner)
	line := make([]byte, 0, len(body)+len(o)+20)
	line = append(append(append(line, `{"owner":`...), o...), `,"run":`...)
	return append(append(line, body...), '}', '\n'), err
}

func (rr *runRecorder) append(id, owner string, body []byte) error {
	line, err := runLine(owner, body)
	if err != nil {
		return err
	}
	if rr.openID != id {
		rr.closeFile()
		f, err := os.OpenFile(rr.file(id), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		rr.open, rr.openID = f, id
	}
	if _, err := rr.open.Write(line); err != nil {
		rr.closeFile()
		return err
	}
	return nil
}

// closeFile closes the session file append keeps open.
func (rr *runRecorder) closeFile() {
	if rr.open != nil {
		rr.open.Close()
	}
	rr.open, rr.openID = nil, ""
}

// removeFile removes a session's file, closing it first when open.
func (rr *runRecorder) removeFile(id string) {
	if rr.openID == id {
		rr.closeFile()
	}
	os.Remove(rr.file(id))
}

// reread loads the records an earlier run of the kit kept, dropping
// files past the TTL.
func (rr *runRecorder) reread(s *Server) {
	names, _ := filepath.Glob(filepath.Join(rr.dir, "*.jsonl"))
	now := time.Now()
	for _, name := range names {
		if st, err := os.Stat(name); err != nil || now.Sub(st.ModTime()) > rr.ttl {
			os.Remove(name)
			continue
		}
		if err := rr.rereadFile(name); err != nil {
			s.log.Warn("run records: a file of an earlier run does not read; removed", "file", name, "err", err)
			os.Remove(name)
		}
	}
	rr.trimLocked(now)
}

func (rr *runRecorder) rereadFile(name string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var c *runChain
	var id string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		var l runFileLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Run == nil {
			return fmt.Errorf("line %d does not decode", n)
		}
		r, err := l.Run.Run()
		if err != nil {
			return err
		}
		body, _ := json.Marshal(l.Run)
		if c == nil {
			id = r.Session
			c = &runChain{owner: l.Owner}
		}
		c.seq, c.prev = r.Seq, l.Run.Digest
		c.last, _ = time.Parse(time.RFC3339Nano, r.Ended)
		c.records = append(c.records, runEntry{prompt: r.Prompt, ended: c.last, body: body})
		rr.bytes += len(body)
	}
	if c != nil && rr.file(id) == name {
		rr.chains[id] = c
	}
	return sc.Err()
}

// rewrite replaces a session's file with the records it keeps.
func (rr *runRecorder) rewrite(id string, c *runChain) error {
	var buf bytes.Buffer
	for _, e := range c.records {
		line, err := runLine(c.owner, e.body)
		if err != nil {
			return err
		}
		buf.Write(line)
	}
	if rr.openID == id {
		rr.closeFile() // append reopens the new file
	}
	tmp := rr.file(id) + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, rr.file(id))
}
