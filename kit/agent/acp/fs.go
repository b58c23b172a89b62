package acp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// area is one of the session's directories the agent may use.
type area struct {
	name     string // work, input or output
	dir      string // as the session names it
	real     string // with symbolic links resolved
	writable bool
}

// within reports whether path lies in dir, and its path relative to dir.
func within(dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// locate finds the area a path lies in. A path outside every area is
// tried again with its symbolic links resolved (for a write, those of its
// nearest existing parent).
func (c *conversation) locate(path string) (area, string, *rpcError) {
	if path == "" {
		return area{}, "", rpcErrorf(codeInvalidParams, "path is empty")
	}
	if !filepath.IsAbs(path) {
		return area{}, "", rpcErrorf(codeInvalidParams, "path %q is not absolute: ACP paths must be absolute", path)
	}
	clean := filepath.Clean(path)
	if a, rel, ok := c.match(clean); ok {
		return a, rel, nil
	}
	if real, ok := resolveExisting(clean); ok {
		if a, rel, ok := c.match(real); ok {
			return a, rel, nil
		}
	}
	return area{}, "", c.outside(path)
}

func (c *conversation) match(p string) (area, string, bool) {
	for _, a := range c.areas {
		if rel, ok := within(a.dir, p); ok {
			return a, rel, true
		}
		if rel, ok := within(a.real, p); ok {
			return a, rel, true
		}
	}
	return area{}, "", false
}

func (c *conversation) outside(path string) *rpcError {
	dirs := make([]string, 0, len(c.areas))
	for _, a := range c.areas {
		dirs = append(dirs, a.dir)
	}
	return rpcErrorf(codeInvalidParams, "path %q is outside the session's directories (%s)", path, strings.Join(dirs, ", "))
}

// resolveExisting resolves the symbolic links of p, or of its nearest
// existing parent with the rest appended. A dangling link is followed to
// where it points, so a write through it lands where the link says.
func resolveExisting(p string) (string, bool) {
	for range 40 { // as many links as Linux follows
		rest := ""
		cur := p
		for {
			if r, err := filepath.EvalSymlinks(cur); err == nil {
				return filepath.Join(r, rest), true
			}
			if target, err := os.Readlink(cur); err == nil {
				if !filepath.IsAbs(target) {
					target = filepath.Join(filepath.Dir(cur), target)
				}
				p = filepath.Join(target, rest)
				break
			}
			parent := filepath.Dir(cur)
			if parent == cur {
				return "", false
			}
			rest = filepath.Join(filepath.Base(cur), rest)
			cur = parent
		}
	}
	return "", false
}

// openIn opens a file through an os.Root of its area, so no symbolic link
// can lead the open outside it. A link the root refuses (an absolute one,
// or one into another area) is resolved and the path located again.
func (c *conversation) openIn(path string, write bool, flag int) (*os.File, error) {
	a, rel, rerr := c.locate(path)
	if rerr != nil {
		return nil, rerr
	}
	f, err := openRooted(a, rel, write, flag)
	if err == nil || errors.Is(err, fs.ErrNotExist) && !write {
		return f, err
	}
	if real, ok := resolveExisting(filepath.Clean(path)); ok {
		a2, rel2, ok := c.match(real)
		if !ok {
			return nil, c.outside(path)
		}
		if a2 != a || rel2 != rel {
			return openRooted(a2, rel2, write, flag)
		}
	}
	return nil, err
}

func openRooted(a area, rel string, write bool, flag int) (*os.File, error) {
	if write && !a.writable {
		return nil, rpcErrorf(codeInvalidParams, "the %s directory %s is read-only", a.name, a.dir)
	}
	root, err := os.OpenRoot(a.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if write {
		if dir := filepath.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
		}
	}
	// O_NONBLOCK: opening a FIFO must not hang the request.
	return root.OpenFile(rel, flag|syscall.O_NONBLOCK, 0o644)
}

// fsError turns a file error into a JSON-RPC error the agent can read.
func fsError(path string, err error) error {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, syscall.ENXIO) { // a FIFO or socket nobody reads
		return rpcErrorf(codeInvalidParams, "%s is not a regular file", path)
	}
	code := codeInternal
	if errors.Is(err, fs.ErrNotExist) {
		code = codeNotFound
	}
	return &rpcError{Code: code, Message: fmt.Sprintf("%s: %v", path, unwrapPathError(err))}
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readTextFile serves fs/read_text_file: line is 1-based, limit counts
// lines.
func (c *conversation) readTextFile(params json.RawMessage) (any, error) {
	var p struct {
		Path  string `json:"path"`
		Line  *int64 `json:"line"`
		Limit *int64 `json:"limit"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, rpcErrorf(codeInvalidParams, "invalid params: %v", err)
	}
	if p.Line != nil && *p.Line < 0 || p.Limit != nil && *p.Limit < 0 {
		return nil, rpcErrorf(codeInvalidParams, "line and limit must not be negative")
	}
	f, err := c.openRegular(p.Path, false, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	first := int64(1)
	if p.Line != nil && *p.Line > 0 {
		first = *p.Line
	}
	limit := int64(-1)
	if p.Limit != nil {
		limit = *p.Limit
	}
	var out strings.Builder
	br := bufio.NewReader(f)
	for n := int64(1); limit != 0; n++ {
		line, err := br.ReadString('\n')
		if n >= first && line != "" {
			if out.Len()+len(line) > maxReadBytes {
				return nil, rpcErrorf(codeInvalidParams, "%s: more than %d bytes; read it in parts with line and limit", p.Path, maxReadBytes)
			}
			out.WriteString(line)
			if limit > 0 {
				limit--
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fsError(p.Path, err)
		}
	}
	c.log.Debug("acp: fs/read_text_file", "path", p.Path, "bytes", out.Len())
	return map[string]string{"content": out.String()}, nil
}

// writeTextFile serves fs/write_text_file, creating the file and its
// parent directories as needed.
func (c *conversation) writeTextFile(params json.RawMessage) (any, error) {
	var p struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, rpcErrorf(codeInvalidParams, "invalid params: %v", err)
	}
	if p.Content == nil {
		return nil, rpcErrorf(codeInvalidParams, "content is missing")
	}
	f, err := c.openRegular(p.Path, true, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c.giveToSession(f)
	if _, err := io.WriteString(f, *p.Content); err != nil {
		return nil, fsError(p.Path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fsError(p.Path, err)
	}
	c.log.Debug("acp: fs/write_text_file", "path", p.Path, "bytes", len(*p.Content))
	return map[string]any{}, nil
}

// giveToSession hands a file the kit has just created for the agent to
// the session's uid (sandbox.Session.Chown: through the monitor where the
// kit's privileges are separated), so that the agent's own programs can
// change it in place as they can the files they make themselves. A file
// that is not the kit's (one the agent made) is left as it is; a file that
// cannot be handed over stays the kit's, readable by the agent.
func (c *conversation) giveToSession(f *os.File) {
	st, err := f.Stat()
	if err != nil {
		return
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return
	}
	if err := c.s.Sandbox.Chown(real); err != nil {
		c.log.Debug("acp: fs/write_text_file: the file stays the kit's", "path", real, "err", err)
	}
}

// openRegular opens path inside the session's directories for the fs
// methods and checks that it is a regular file in blocking mode; errors come
// back as JSON-RPC errors.
func (c *conversation) openRegular(path string, write bool, flag int) (*os.File, error) {
	f, err := c.openIn(path, write, flag)
	if err != nil {
		return nil, fsError(path, err)
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		err = fsError(path, err)
	case !st.Mode().IsRegular():
		err = rpcErrorf(codeInvalidParams, "%s is not a regular file", path)
	default:
		if err = clearNonblock(f); err != nil {
			err = fsError(path, err)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// clearNonblock undoes the O_NONBLOCK used to open the file safely.
func clearNonblock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}
