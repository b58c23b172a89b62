# The Go programs, built with buildGoModule: glovebox-kit (the runtime
# inside every image), gbx (the CLI), glovebox-sbom (writes an image's SBOM
# while it builds), and `tests`, a derivation that runs go vet and go test
# over the whole module. The kit's and gbx's packages also install
# glovebox-sandbox, the small sandbox supervisor, beside them in bin/: a
# kit (or gbx dev's in-process kit) that finds it there starts every
# session's supervisor from it instead of re-executing itself.
#
# vendorHash lives in ./vendor-hash.nix. It is the NAR hash of `go mod vendor`
# output, which is exactly what buildGoModule's fixed-output goModules
# derivation stores. nix/vendorhash_test.go recomputes it and prints the new
# value when go.mod, go.sum or the imports change; update it with
#   go test ./nix -run TestVendorHash -update
{ pkgs, version }:
let
  inherit (pkgs) lib;
  root = ../.;

  # go.mod's go directive is the oldest toolchain that can build the module;
  # the sandbox cannot download a newer one.
  goDirective =
    let
      m = builtins.match ".*\ngo ([0-9][0-9.]*)\n.*" ("\n" + builtins.readFile (root + "/go.mod") + "\n");
    in
    if m == null then throw "glovebox: no go directive in go.mod" else builtins.head m;

  go = pkgs.go_1_26;
  buildGoModule = pkgs.buildGo126Module;

  # What never belongs in a build: VCS data, build results, dependencies
  # fetched by other tools.
  junk =
    rel:
    builtins.elem rel [
      ".git"
      "dist"
    ]
    || builtins.match "result.*" rel != null
    || builtins.match "(.*/)?node_modules" rel != null;

  # The Nix files: left out of the binaries' source so that editing an image
  # does not rebuild them. Go testdata (including golden flake.nix files
  # under generator/) stays in.
  nixFiles =
    rel:
    builtins.elem rel [
      "flake.nix"
      "flake.lock"
      "baseimages"
    ]
    || builtins.match "nix/[^/]*\\.nix" rel != null;

  source =
    name: excluded:
    lib.cleanSourceWith {
      inherit name;
      src = root;
      filter = path: type: !(excluded (lib.removePrefix (toString root + "/") (toString path)));
    };

  src = source "glovebox-source" (rel: junk rel || nixFiles rel);
  # The tests read the Nix files too (the lock, the example manifests).
  testSrc = source "glovebox-test-source" junk;

  module = "github.com/glovebox-dev/glovebox";

  common = {
    inherit version src;
    vendorHash = import ./vendor-hash.nix;
    env.CGO_ENABLED = 0;
    # The tests run once, in `tests`, not in every binary's build.
    doCheck = false;
  };

  binary =
    {
      pname,
      versionVar,
      description,
      sandbox ? true,
    }:
    let
      # Go-side versions carry the tag's "v" (gbx reads a vX.Y.Z as a
      # release, to pin the matching kit).
      ldflags = [
        "-s"
        "-w"
        "-X ${versionVar}=v${version}"
      ];
    in
    buildGoModule (
      common
      // {
        inherit pname ldflags;
        subPackages = [ "cmd/${pname}" ] ++ lib.optional sandbox "cmd/glovebox-sandbox";
        passthru.glovebox = {
          inherit ldflags versionVar;
          goVersion = go.version;
        };
        meta = {
          inherit description;
          mainProgram = pname;
          homepage = "https://github.com/glovebox-dev/glovebox";
          platforms = [
            "x86_64-linux"
            "aarch64-linux"
          ];
        };
      }
    );
in
assert lib.assertMsg (lib.versionAtLeast go.version goDirective)
  "glovebox: go.mod asks for Go ${goDirective} but nix/go.nix uses Go ${go.version}; move nix/go.nix to a newer go_1_XX and buildGo1XXModule";
{
  inherit
    go
    goDirective
    src
    testSrc
    ;

  glovebox-kit = binary {
    pname = "glovebox-kit";
    versionVar = "${module}/kit.Version";
    description = "The Glovebox runtime: serves one agent behind an authenticated WebSocket endpoint";
  };

  gbx = binary {
    pname = "gbx";
    versionVar = "${module}/internal/cli.Version";
    description = "The Glovebox command line: scaffold, generate, run and talk to boxes";
  };

  glovebox-sbom = binary {
    pname = "glovebox-sbom";
    versionVar = "main.Version";
    description = "Writes a Glovebox image's CycloneDX SBOM from its Nix closure at build time";
    sandbox = false;
  };

  tests = buildGoModule (
    common
    // {
      pname = "glovebox-go-tests";
      src = testSrc;
      doCheck = true;
      buildPhase = ''
        runHook preBuild
        runHook postBuild
      '';
      # Tests that need nix or a container runtime skip here: neither is in
      # the sandbox and CI is unset. -race needs cgo, which the builds turn
      # off; contributors run go test -race in the dev shell.
      checkPhase = ''
        runHook preCheck
        export GOFLAGS=''${GOFLAGS//-trimpath/}
        export HOME=$TMPDIR
        go vet ./...
        go test -count=1 ./...
        runHook postCheck
      '';
      installPhase = ''
        runHook preInstall
        touch $out
        runHook postInstall
      '';
    }
  );
}
