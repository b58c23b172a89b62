//go:build !linux

package main

import (
	"fmt"
	"os"
)

// The attacks are Linux system calls; elsewhere there is nothing to run.
func main() {
	fmt.Fprintln(os.Stderr, "attacker: Linux only")
	os.Exit(2)
}
