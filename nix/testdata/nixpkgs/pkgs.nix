# legacyPackages.<system> of the stand-in nixpkgs. See flake.nix.
{ lib, system }:
let
  # stub makes a derivation that is never built. It carries the attributes
  # callers read from real packages (pname, version, meta, passthru) and a
  # `standIn` record of the function and arguments that produced it.
  stub =
    name: extra:
    let
      drv = derivation {
        inherit name system;
        builder = "/bin/sh";
        args = [
          "-c"
          "echo stand-in > $out"
        ];
      };
    in
    drv
    // {
      pname = name;
      version = "0.0.0-stand-in";
      meta = {
        mainProgram = name;
      };
      passthru = { };
    }
    // extra;

  # A plain package: `leaf "jq"`.
  leaf = name: stub name { };

  # A function result: records its arguments; passthru is merged into the
  # result as mkDerivation does.
  called =
    function: name: args: extra:
    let
      passthru = args.passthru or { };
    in
    stub name (
      passthru
      // {
        inherit passthru;
        standIn = {
          inherit function args;
        };
      }
      // extra
    );

  # Real builders fail at build time on a list element that is not a
  # package; the stand-in fails at evaluation, naming the function.
  allPackages =
    function: list:
    lib.assertMsg (builtins.all (x: builtins.isAttrs x && x ? outPath || builtins.isPath x) list) "${function}: every element must be a package";

  isSRI = h: builtins.isString h && builtins.match "sha256-[A-Za-z0-9+/]{43}=" h != null;

  names = import ./names.nix;
  leafNames = names.packages;
  pythonPackageNames = names.pythonPackages;

  python3Packages = lib.genAttrs pythonPackageNames leaf;

  mkGo =
    version:
    stub "go" {
      inherit version;
      GOOS = "linux";
      GOARCH = if system == "aarch64-linux" then "arm64" else "amd64";
      CGO_ENABLED = 1;
    };

  go_1_26 = mkGo "1.26.2";

  mkBuildGoModule =
    go: args:
    assert lib.assertMsg (args ? pname && args ? version) "buildGoModule: pname and version are required";
    assert lib.assertMsg (args ? src) "buildGoModule: src is required";
    assert lib.assertMsg (args ? vendorHash) "buildGoModule: vendorHash is missing";
    assert lib.assertMsg (
      args.vendorHash == null || isSRI args.vendorHash
    ) "buildGoModule: vendorHash must be null or an SRI sha256 hash";
    assert lib.assertMsg (!(args ? CGO_ENABLED)) "buildGoModule: set env.CGO_ENABLED, not CGO_ENABLED";
    assert lib.assertMsg (
      !(builtins.elem "-trimpath" (args.GOFLAGS or [ ]))
    ) "buildGoModule: -trimpath is added by default";
    called "buildGoModule" "${args.pname}-${args.version}" args {
      inherit (args) pname version;
      meta = args.meta or { };
      inherit go;
      goModules = stub "${args.pname}-${args.version}-go-modules" { };
      vendorHash = args.vendorHash;
    };

  dockerTools = {
    streamLayeredImage =
      args:
      assert lib.assertMsg (args ? name) "streamLayeredImage: name is required";
      assert lib.assertMsg (builtins.isList (args.contents or [ ])) "streamLayeredImage: contents must be a list";
      assert allPackages "streamLayeredImage: contents" (args.contents or [ ]);
      assert lib.assertMsg (builtins.isAttrs (args.config or { })) "streamLayeredImage: config must be an attrset";
      assert lib.assertMsg (
        builtins.isString (args.fakeRootCommands or "")
      ) "streamLayeredImage: fakeRootCommands must be a string";
      assert lib.assertMsg (
        (args.maxLayers or 100) > 1 && (args.maxLayers or 100) <= 125
      ) "streamLayeredImage: maxLayers must be in 2..125";
      called "dockerTools.streamLayeredImage" "stream-${baseNameOf args.name}" args {
        imageName = args.name;
        imageTag = args.tag or "stand-in-hash";
        isExe = true;
      };

    fakeNss = stub "fake-nss" {
      override =
        args:
        assert lib.assertMsg (builtins.isList (args.extraPasswdLines or [ ])) "fakeNss: extraPasswdLines must be a list";
        assert lib.assertMsg (builtins.isList (args.extraGroupLines or [ ])) "fakeNss: extraGroupLines must be a list";
        called "dockerTools.fakeNss.override" "fake-nss" args { };
    };

    caCertificates = leaf "ca-certificates";
    usrBinEnv = leaf "usr-bin-env";
    binSh = leaf "bin-sh";
  };

  # importNpmLock { npmRoot }: the npm dependencies of a package-lock.json,
  # each fetched by its URL and integrity hash. Like the real one, it
  # fails on a package the lock gives no resolved URL or integrity.
  importNpmLock = {
    npmConfigHook = leaf "npm-config-hook";
    __functor =
      self: args:
      assert lib.assertMsg (args ? npmRoot) "importNpmLock: npmRoot is required (or package and packageLock)";
      let
        lock = builtins.fromJSON (builtins.readFile (args.npmRoot + "/package-lock.json"));
        manifest = builtins.fromJSON (builtins.readFile (args.npmRoot + "/package.json"));
        entries = lib.filterAttrs (k: v: k != "" && !(v.link or false)) (lock.packages or { });
        bad = builtins.filter (
          k:
          !(builtins.isString (entries.${k}.resolved or null) && lib.hasPrefix "https://" entries.${k}.resolved)
          || !(builtins.isString (entries.${k}.integrity or null))
        ) (builtins.attrNames entries);
      in
      assert lib.assertMsg ((lock.lockfileVersion or 1) >= 2) "importNpmLock: lockfileVersion must be 2 or 3";
      assert lib.assertMsg (bad == [ ]) "importNpmLock: ${builtins.head bad} has no resolved https URL or no integrity";
      assert lib.assertMsg (
        (lock.packages."".dependencies or { }) == (manifest.dependencies or { })
      ) "importNpmLock: package-lock.json does not match package.json's dependencies";
      called "importNpmLock" "${manifest.name or "npm"}-npm-deps" {
        packages = builtins.attrNames entries;
        dependencies = manifest.dependencies or { };
      } { };
  };

  pkgs =
    lib.genAttrs leafNames leaf
    // {
      inherit lib system dockerTools python3Packages go_1_26;
      go = go_1_26;

      stdenv = {
        hostPlatform = {
          inherit system;
          isLinux = true;
        };
        buildPlatform = pkgs.stdenv.hostPlatform;
        cc = leaf "gcc-wrapper" // {
          cc = leaf "gcc" // {
            lib = leaf "gcc-lib";
          };
        };
      };

      inherit importNpmLock;
      autoPatchelfHook = leaf "auto-patchelf-hook";

      buildNpmPackage =
        args:
        assert lib.assertMsg (args ? pname && args ? version) "buildNpmPackage: pname and version are required";
        assert lib.assertMsg (args ? src) "buildNpmPackage: src is required";
        assert lib.assertMsg (args ? npmDeps || args ? npmDepsHash) "buildNpmPackage: npmDeps or npmDepsHash is required";
        assert lib.assertMsg (
          !(args ? npmDeps && (args.npmDeps.standIn.function or "") == "importNpmLock")
          || (args.npmConfigHook or null) == importNpmLock.npmConfigHook
        ) "buildNpmPackage: npmDeps from importNpmLock needs npmConfigHook = importNpmLock.npmConfigHook";
        assert allPackages "buildNpmPackage: nativeBuildInputs" (args.nativeBuildInputs or [ ]);
        assert allPackages "buildNpmPackage: buildInputs" (args.buildInputs or [ ]);
        called "buildNpmPackage" "${args.pname}-${args.version}" (builtins.removeAttrs args [ "npmDeps" "src" ] // {
          npmDeps = args.npmDeps.standIn.args or null;
        }) {
          inherit (args) pname version;
          meta = args.meta or { };
        };

      buildGoModule = mkBuildGoModule go_1_26;
      buildGo126Module = mkBuildGoModule go_1_26;

      python3 = stub "python3" {
        version = "3.13.9";
        pkgs = python3Packages;
        withPackages =
          f:
          let
            selected = f python3Packages;
          in
          assert lib.assertMsg (builtins.isList selected) "python3.withPackages: the function must return a list";
          assert allPackages "python3.withPackages" selected;
          called "python3.withPackages" "python3-3.13.9-env" { packages = map (p: p.pname) selected; } { };
      };

      makeFontsConf =
        args:
        assert lib.assertMsg (args ? fontDirectories) "makeFontsConf: fontDirectories is required";
        assert allPackages "makeFontsConf: fontDirectories" args.fontDirectories;
        called "makeFontsConf" "fonts.conf" args { };

      mkShell =
        args:
        assert lib.assertMsg (builtins.isList (args.packages or [ ])) "mkShell: packages must be a list";
        assert allPackages "mkShell: packages" (args.packages or [ ]);
        called "mkShell" (args.name or "nix-shell") args { };

      runCommand =
        name: env: script:
        assert lib.assertMsg (builtins.isString script) "runCommand: the script must be a string";
        called "runCommand" name (env // { inherit script; }) { };

      # closureInfo { rootPaths }: the closure's store-paths and
      # registration (with NAR hashes), made at build time.
      closureInfo =
        args:
        assert lib.assertMsg (builtins.isList (args.rootPaths or null)) "closureInfo: rootPaths must be a list";
        assert allPackages "closureInfo: rootPaths" args.rootPaths;
        called "closureInfo" "closure-info" args { };

      writeText =
        name: text:
        assert lib.assertMsg (builtins.isString text) "writeText: text must be a string";
        called "writeText" name { inherit text; } { };

      symlinkJoin =
        args:
        assert lib.assertMsg (args ? name && args ? paths) "symlinkJoin: name and paths are required";
        assert allPackages "symlinkJoin: paths" args.paths;
        called "symlinkJoin" args.name args { };

      # Renamed or removed in nixpkgs; the real attributes throw as well.
      noto-fonts-emoji = throw "'noto-fonts-emoji' has been renamed to 'noto-fonts-color-emoji'";
      nodejs_20 = throw "'nodejs_20' has been removed as it reached its end of life";
    };
in
pkgs
