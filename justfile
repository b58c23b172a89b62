# Contributor tasks. Every recipe is a thin alias for a command that also
# works without just; CI (.ci/run) runs the same commands.
set shell := ["bash", "-euo", "pipefail", "-c"]

export NIX_CONFIG := "experimental-features = nix-command flakes\nbuild-users-group ="

# List the recipes.
default:
    @just --list

# Run a real box locally on embedded defaults: prompt it, show what came back.
demo:
    go run ./cmd/gbx demo

# Run every test with the race detector (the README's test command).
test:
    go test -race -count=1 ./...

# What CI runs on a fresh machine: installs nix-bin, npm deps and staticcheck, lints, tests, fuzzes.
ci:
    bash .ci/run

# Check gofmt, go vet and staticcheck (pinned in .ci/lint) the way CI does.
lint:
    bash .ci/lint

# Run the benchmarks recorded in BENCHMARKS.md.
bench:
    go test -run '^$' -bench . -benchmem ./...

# Build the binaries into ./bin (glovebox-sandbox, the sandbox supervisor, beside the kit and gbx).
build:
    mkdir -p bin
    go build -trimpath -o bin/ ./cmd/gbx ./cmd/glovebox-kit ./cmd/glovebox-sandbox

# Fuzz every target in the module, one after the other: just fuzz 1m
fuzz fuzztime="20s":
    bash .ci/fuzz {{fuzztime}}

# Evaluate the flake offline against the stand-in nixpkgs (what CI checks).
nix-check:
    nix flake check --no-build --offline --no-write-lock-file --override-input nixpkgs path:$PWD/nix/testdata/nixpkgs path:$PWD
    go test -race -count=1 ./nix ./internal/nixtest

# Show the flake's outputs, evaluated against the stand-in nixpkgs.
nix-show:
    nix flake show --offline --no-write-lock-file --override-input nixpkgs path:$PWD/nix/testdata/nixpkgs path:$PWD

# Build a base image for real (needs nixpkgs and a binary cache): just image media
image base="base":
    nix build .#box-{{base}} --out-link result-{{base}}

# Build a base image and load it into Docker.
load base="base": (image base)
    ./result-{{base}} | docker load

# Rewrite nix/vendor-hash.nix after go.mod, go.sum or the imports change.
vendor-hash:
    go test ./nix -count=1 -run TestVendorHash -update

# Check the stand-in's package names against the pinned nixpkgs (needs network): prints [] when all exist.
verify-names:
    nix eval --json --impure --expr 'import ./nix/testdata/nixpkgs/verify.nix { nixpkgs = builtins.getFlake "github:NixOS/nixpkgs/78e9c786dc08cd4f3420c2395cd977206a9b1da2"; }'
