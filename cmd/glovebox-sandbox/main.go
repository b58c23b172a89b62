// Command glovebox-sandbox is the sandbox supervisor of glovebox-kit: the
// process that sets up a session's namespaces, mounts, limits and
// privileges, puts itself in the session's Landlock domain and seccomp
// filter, and runs the session's commands, which inherit both. Installed beside the kit's
// executable (owned by root or the kit's user, writable by no one else),
// it spares every session and the boot probe a re-execution of the whole
// kit. It links only the standard library, x/sys and kit/sandbox.
//
// The kit starts it under the name glovebox-sandbox-init; run by hand, it
// says what it is.
package main

import (
	"os"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

func main() {
	// A session helper (argv[0] sandbox.HelperName) runs this program too.
	sandbox.MaybeSupervise()
	os.Exit(sandbox.SupervisorMain())
}
