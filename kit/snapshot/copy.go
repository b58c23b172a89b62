package snapshot

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Copy copies the roots of from into to (a fork): directories, symlinks
// and regular files, each file cloned (FICLONE, copy-on-write) where the
// file system can, else copied (copy_file_range, then read and write).
// Special files and files from may not read are left out, as Take leaves
// them. It returns "reflink" when every file was cloned, else "copy". On
// an error what was written is removed.
func Copy(ctx context.Context, from, to FS, roots Roots, lim Limits) (method string, err error) {
	w := &writer{fsys: to}
	var size int64
	entries, cloned, copied := 0, 0, 0
	visit := func(e protocol.SnapshotEntry, src *os.File) error {
		if entries++; entries > lim.MaxEntries {
			return fmt.Errorf("more than %d entries: %w", lim.MaxEntries, ErrTooLarge)
		}
		if src == nil {
			return w.put(e)
		}
		if size += e.Size; size > lim.MaxSize {
			return fmt.Errorf("more than %d bytes of files: %w", lim.MaxSize, ErrTooLarge)
		}
		return w.file(e, func(dst *os.File) error {
			if e.Size > 0 && unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil {
				cloned++
				return nil
			}
			copied++
			// To its end, within the size limit: a file a running agent
			// writes is copied as it is when read. A LimitedReader of an
			// *os.File: io.Copy uses copy_file_range.
			size -= e.Size
			n, err := io.Copy(dst, io.LimitReader(src, lim.MaxSize-size+1))
			if size += n; err == nil && size > lim.MaxSize {
				err = fmt.Errorf("more than %d bytes of files: %w", lim.MaxSize, ErrTooLarge)
			}
			return err
		})
	}
	for i, ok := range roots {
		if !ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			w.undo()
			return "", err
		}
		if err := walk(ctx, from, Root(i), visit, func(protocol.SnapshotSkip) {}); err != nil {
			w.undo()
			return "", fmt.Errorf("copy %s: %w", rootNames[i], err)
		}
	}
	w.finish()
	if copied > 0 || cloned == 0 {
		return "copy", nil
	}
	return "reflink", nil
}
