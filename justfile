# Contributor tasks. Every recipe is a thin alias for a command that also
# works without just; CI (.ci/run) runs the same commands.
set shell := ["bash", "-euo", "pipefail", "-c"]

export NIX_CONFIG := "experimental-features = nix-command flakes"

# List the recipes.
default:
    @just --list

# Run a real box locally on embedded defaults: prompt it, show what came back.
demo:
    go run ./cmd/gbx demo

# Run every test with the race detector (the README's test command).
test:
    go test -race -count=1 ./...

# What CI runs on a fresh machine: installs nix-bin and npm deps, then tests.
ci:
    bash .ci/run

# Format, vet and check formatting the way CI does.
lint:
    gofmt -l $(git ls-files '*.go') | (! grep .)
    go vet ./...

# Run the benchmarks recorded in BENCHMARKS.md.
bench:
    go test -run '^$' -bench . -benchmem ./...

# Build the binaries into ./bin.
build:
    mkdir -p bin
    go build -trimpath -o bin/ ./cmd/gbx ./cmd/glovebox-kit

# Fuzz every decoder briefly (FUZZTIME=20s by default).
fuzz fuzztime="20s":
    for f in $(go test -list '^Fuzz' ./protocol | grep ^Fuzz); do go test -run '^$' -fuzz "^$f\$" -fuzztime {{fuzztime}} ./protocol; done
