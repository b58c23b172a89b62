package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

const schema = `
CREATE TABLE IF NOT EXISTS files (
	id TEXT PRIMARY KEY,
	request_id TEXT NOT NULL,
	name TEXT NOT NULL,
	mime TEXT NOT NULL,
	size INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	ttl_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_files_request ON files(request_id);
CREATE INDEX IF NOT EXISTS idx_files_ttl ON files(ttl_at);
`

// privateFile creates path with mode 0600 if it is missing, and sets an
// existing file's mode to 0600.
func privateFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return os.Chmod(path, 0o600)
}

func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	columns, err := queryStrings(ctx, db, `SELECT name FROM pragma_table_info('files')`)
	if err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	if !slices.Contains(columns, "session_id") {
		if _, err := db.ExecContext(ctx, `ALTER TABLE files ADD COLUMN session_id TEXT NOT NULL DEFAULT ''`); err != nil {
			return fmt.Errorf("add session_id column: %w", err)
		}
	}
	if !slices.Contains(columns, "owner") {
		if _, err := db.ExecContext(ctx, `ALTER TABLE files ADD COLUMN owner TEXT NOT NULL DEFAULT ''`); err != nil {
			return fmt.Errorf("add owner column: %w", err)
		}
	}
	return nil
}

// queryStrings runs a query whose rows are one text column and returns them.
func queryStrings(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// row is one files row.
type row struct {
	Name  string
	Mime  string
	Size  int64
	TTLAt int64
}

// lookup returns the row for id, or ErrNotFound.
func (l *Local) lookup(ctx context.Context, id string) (row, error) {
	var r row
	err := l.lookupSQL.QueryRowContext(ctx, id).Scan(&r.Name, &r.Mime, &r.Size, &r.TTLAt)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, ErrNotFound
	}
	if err != nil {
		return row{}, fmt.Errorf("look up file %s: %w", id, err)
	}
	return r, nil
}

// remove deletes id's row and then its file. A crash in between leaves an
// orphan file, which the next sweep removes.
func (l *Local) remove(ctx context.Context, id string) error {
	if _, err := l.db.ExecContext(ctx, `DELETE FROM files WHERE id = ?`, id); err != nil {
		return fmt.Errorf("remove file %s: %w", id, err)
	}
	if err := os.Remove(filepath.Join(l.dir, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove file %s: %w", id, err)
	}
	return nil
}
