package kit

import (
	snap "github.com/glovebox-dev/glovebox/kit/snapshot"
)

// filesFS is the session's directories as a snap.FS, and which of
// them it has, making them if no prompt has yet.
func (ss *session) filesFS() (snap.FS, snap.Roots, error) {
	info, err := ss.sandboxed()
	if err != nil {
		return nil, snap.Roots{}, err
	}
	dirs := info.Sandbox.Dirs()
	var roots snap.Roots
	fsys := make(snap.DirFS, len(roots))
	for i := range roots {
		if i < len(dirs) && dirs[i] != "" {
			roots[i], fsys[i] = true, dirs[i]
		}
	}
	return fsys, roots, nil
}
