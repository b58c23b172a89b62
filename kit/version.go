package kit

import "fmt"

// Version is the kit's version, stamped at build time with
// -ldflags "-X github.com/glovebox-dev/glovebox/kit.Version=v1.2.3"
// (the Nix build does). `glovebox-kit --version` prints it.
var Version = "dev"

// ExitStatusError is returned by Main when it ran as a container's init
// (PID 1) and the kit it started exited with a non-zero status. A main
// exits with Code.
type ExitStatusError struct{ Code int }

func (e *ExitStatusError) Error() string { return fmt.Sprintf("kit exited with status %d", e.Code) }
