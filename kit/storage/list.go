package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// maxList bounds what List returns: the newest files first.
const maxList = 10000

// List returns the files parked in the store, newest first (at most
// 10000), expired ones included until a sweep removes them.
func (l *Local) List(ctx context.Context) ([]protocol.FileInfo, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, name, mime, size, created_at, ttl_at, session_id, request_id
		FROM files ORDER BY created_at DESC, id LIMIT ?`, maxList)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	defer rows.Close()
	out := []protocol.FileInfo{}
	for rows.Next() {
		var f protocol.FileInfo
		var created, ttl int64
		if err := rows.Scan(&f.ID, &f.Name, &f.Mime, &f.Size, &created, &ttl, &f.Session, &f.Prompt); err != nil {
			return nil, fmt.Errorf("list files: %w", err)
		}
		f.Created, f.Expires = time.Unix(created, 0).UTC(), time.Unix(ttl, 0).UTC()
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	return out, nil
}

// Remove deletes a parked file and its row. An unknown id is ErrNotFound.
func (l *Local) Remove(ctx context.Context, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("remove file %q: %w", id, ErrNotFound)
	}
	if _, err := l.lookup(ctx, id); err != nil {
		return fmt.Errorf("remove file %s: %w", id, err)
	}
	return l.remove(ctx, id)
}

// Usage returns how many files the store indexes and their total size.
func (l *Local) Usage(ctx context.Context) (files, bytes int64, err error) {
	err = l.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(size), 0) FROM files`).Scan(&files, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("file store usage: %w", err)
	}
	return files, bytes, nil
}
