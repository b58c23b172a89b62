//go:build !linux

package kit

// protectSecrets does nothing off Linux: boxes are Linux containers.
func protectSecrets() error { return nil }
