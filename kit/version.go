package kit

// Version is the kit's version, stamped at build time with
// -ldflags "-X github.com/glovebox-dev/glovebox/kit.Version=v1.2.3"
// (the Nix build does). `glovebox-kit --version` prints it.
var Version = "dev"
