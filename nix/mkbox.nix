# lib.mkBox: a Glovebox image. The base image's packages, the caller's
# packages and the kit, as a dockerTools.streamLayeredImage (no root, no
# KVM; `./result | docker load`).
#
# The image starts the kit as root (uid 0), with the manifest at
# /etc/glovebox/glovebox.json and port 8080: the kit is a supervisor that
# runs each session's agents under their own unprivileged uids, which only
# root can do. Only a small monitor stays root (privilege separation, see
# kit/privsep_linux.go): the process that serves HTTP and parses clients'
# and agents' bytes runs as the user glovebox (uid/gid 10001), the owner
# of /var/glovebox, with no capability. /work, /input, /output,
# /var/glovebox and /home/glovebox belong to glovebox, and so do the other
# fs mounts a manifest given as a path declares.
# /tmp is 1777. Timestamps are fixed, so the same inputs give the same image.
#
# base is a built-in base's name, or a base spec from another flake's
# lib.gloveboxBases (a function { pkgs }: { description; packages;
# pythonPackages ? [ ]; env ? { }; } or the set it returns) with baseName
# as its label in GLOVEBOX_BASE and the image labels.
#
# npm is dist/npm (package.json and package-lock.json from gbx generate):
# the npm packages, built from that lock with importNpmLock, their
# programs on PATH.
#
# passthru.glovebox records what the image is made of (base, resolved
# package names, config, directory layout) for tests and tools.
#
# Every image carries its SBOM (CycloneDX 1.6, nix/sbom.nix) at
# /etc/glovebox/sbom.cdx.json, and its manifest there is stamped with the
# closure's provenance (its hash, the SBOM's path and hash) at build time.
# passthru.sbom is that derivation: `nix build .#box-base.sbom`.
{ self }:
let
  # The built-in bases, by name: { pkgs }: { description; packages; ... }.
  bases = self.lib.gloveboxBases;

  # The glovebox user, which owns the writable directories; the kit itself
  # starts as root (kitUser).
  uid = 10001;
  owner = "${toString uid}:${toString uid}";
  kitUser = "0:0";
  manifestPath = "/etc/glovebox/glovebox.json";
  sbomPath = "/etc/glovebox/sbom.cdx.json";
  epoch = "1970-01-01T00:00:01Z";

  # Directories every image creates, with owner and mode.
  fixedLayout = [
    { path = "/work"; mode = "0755"; inherit owner; }
    { path = "/input"; mode = "0755"; inherit owner; }
    { path = "/output"; mode = "0755"; inherit owner; }
    { path = "/var/glovebox"; mode = "0755"; inherit owner; }
    { path = "/var/glovebox/files"; mode = "0755"; inherit owner; }
    { path = "/home/glovebox"; mode = "0755"; inherit owner; }
    { path = "/tmp"; mode = "1777"; owner = "0:0"; }
    { path = "/etc/glovebox"; mode = "0755"; owner = "0:0"; }
  ];

  kitFor =
    pkgs:
    let
      system = pkgs.stdenv.hostPlatform.system;
    in
    if self.packages ? ${system} then
      self.packages.${system}.glovebox-kit
    else
      throw "glovebox mkBox: no glovebox-kit for ${system}; pass kit = ... or use x86_64-linux or aarch64-linux";

  sbomToolFor =
    pkgs:
    let
      system = pkgs.stdenv.hostPlatform.system;
    in
    if self.packages ? ${system} then
      self.packages.${system}.glovebox-sbom
    else
      throw "glovebox mkBox: no glovebox-sbom for ${system}; pass sbomTool = ... or use x86_64-linux or aarch64-linux";
in
{
  pkgs,
  name,
  version ? "0.1.0",
  base ? "base",
  baseName ? null,
  packages ? [ ],
  pythonPackages ? [ ],
  manifest,
  env ? { },
  tag ? version,
  kit ? kitFor pkgs,
  # A directory with package.json and package-lock.json (dist/npm): the
  # npm packages, built from the lock (nix/npm.nix), their programs on
  # PATH.
  npm ? null,
  # The program that writes the image's SBOM at build time (runs on the
  # build machine, is not in the image).
  sbomTool ? sbomToolFor pkgs,
}:
let
  inherit (pkgs) lib;

  fail = msg: throw "glovebox mkBox (${name}): ${msg}";

  shape = "{ description; packages; pythonPackages ? [ ]; env ? { }; }";

  # The base's label in GLOVEBOX_BASE, the image labels and passthru.
  label =
    if baseName != null then
      (if builtins.isString baseName then baseName else fail "baseName must be a string, got a ${builtins.typeOf baseName}")
    else if builtins.isString base then
      base
    else
      "custom";

  # A base is one of the built-in names, or a base spec as another flake's
  # lib.gloveboxBases.<name> holds it: a function { pkgs }: ${shape}, or
  # the attribute set it returns. The common layer (the "base" base) is in
  # every image either way.
  common = bases.base { inherit pkgs; };
  spec =
    if builtins.isString base then
      if !(bases ? ${base}) then
        fail "unknown base \"${base}\"; use one of: ${lib.concatStringsSep ", " (builtins.attrNames bases)}, or pass a base spec ({ pkgs }: ${shape})"
      else if base == "base" then
        { packages = [ ]; }
      else
        bases.${base} { inherit pkgs; }
    else if builtins.isFunction base then
      base { inherit pkgs; }
    else if builtins.isAttrs base then
      base
    else
      fail "base must be one of ${lib.concatStringsSep ", " (builtins.attrNames bases)} or a base spec ({ pkgs }: ${shape}), got a ${builtins.typeOf base}";

  badSpec = msg: fail "base ${label}: ${msg}; a base spec is ${shape}";
  checkList =
    what: pred: kind: one: xs:
    if !(builtins.isList xs) then
      badSpec "${what} must be a list of ${kind}, got a ${builtins.typeOf xs}"
    else
      let
        bad = builtins.filter (i: !(pred (builtins.elemAt xs i))) (builtins.genList (i: i) (builtins.length xs));
        i = builtins.head bad;
      in
      if bad == [ ] then
        xs
      else
        badSpec "${what}[${toString i}] is a ${builtins.typeOf (builtins.elemAt xs i)}, not ${one}";
  chosen =
    if !(builtins.isAttrs spec) then
      badSpec "the spec is a ${builtins.typeOf spec}, not an attribute set"
    else if !(spec ? packages) then
      badSpec "packages is missing"
    else
      let
        env = spec.env or { };
        badEnv = builtins.filter (k: !(builtins.isString env.${k})) (builtins.attrNames env);
        description = spec.description or "";
      in
      {
        description =
          if builtins.isString description then description else badSpec "description must be a string, got a ${builtins.typeOf description}";
        packages = checkList "packages" lib.isDerivation "packages" "a package" spec.packages;
        pythonPackages = checkList "pythonPackages" builtins.isString "python3Packages names" "a name" (spec.pythonPackages or [ ]);
        env =
          if !(builtins.isAttrs env) then
            badSpec "env must be an attribute set of strings, got a ${builtins.typeOf env}"
          else if badEnv != [ ] then
            badSpec "env.${builtins.head badEnv} must be a string, got a ${builtins.typeOf env.${builtins.head badEnv}}"
          else
            env;
      };

  resolve =
    attr:
    let
      value = lib.attrByPath (lib.splitString "." attr) (fail "package \"${attr}\" is not an attribute of nixpkgs; check the name at https://search.nixos.org/packages (channel 26.05)") pkgs;
    in
    if lib.isDerivation value then value else fail "\"${attr}\" names an attribute of nixpkgs that is not a package";

  pythonNames = lib.unique (chosen.pythonPackages ++ pythonPackages);
  pythonSelect = ps: map (n: ps.${n} or (fail "python package \"${n}\" is not in python3Packages")) pythonNames;
  python = lib.optional (pythonNames != [ ]) (pkgs.python3.withPackages pythonSelect);

  user = map resolve packages;

  nss = pkgs.dockerTools.fakeNss.override {
    extraPasswdLines = [ "glovebox:x:${owner}:glovebox:/home/glovebox:/bin/sh" ];
    extraGroupLines = [ "glovebox:x:${toString uid}:" ];
  };

  npmPackages = lib.optional (npm != null) (
    import ./npm.nix {
      inherit pkgs name;
      src =
        if builtins.isPath npm || builtins.isString npm then
          npm
        else
          fail "npm must be a directory with package.json and package-lock.json, got a ${builtins.typeOf npm}";
    }
  );

  contents = [ kit nss ] ++ common.packages ++ chosen.packages ++ python ++ user ++ npmPackages;

  # A manifest given as a path is read at evaluation (one given as a
  # derivation is not: that would be import from derivation).
  parsed = if builtins.isPath manifest then builtins.fromJSON (builtins.readFile manifest) else { };
  manifestFile =
    if builtins.isPath manifest then
      assert lib.assertMsg (builtins.isAttrs parsed && (parsed.protocol_version or null) == 1)
        "glovebox mkBox (${name}): ${toString manifest} is not a glovebox.json (protocol_version 1)";
      builtins.path {
        path = manifest;
        name = "glovebox.json";
      }
    else
      manifest;

  # The manifest's own fs mounts (beyond /work, /input, /output) belong to
  # 10001 too, as the fixed directories do.
  fixedPaths = map (d: d.path) fixedLayout;
  mountPaths = lib.unique (
    builtins.filter (p: builtins.isString p && !(builtins.elem p fixedPaths)) (
      map (m: m.path or null) (builtins.attrValues (parsed.fs or { }))
    )
  );
  layout =
    fixedLayout
    ++ map (path: {
      inherit path owner;
      mode = "0755";
    }) mountPaths;

  reserved = [ "GLOVEBOX_MANIFEST" ];
  fixedEnv = {
    # No GLOVEBOX_PORT: the kit listens on it, else on the platform's $PORT
    # (Railway), else on 8080, and an image value would hide $PORT.
    GLOVEBOX_MANIFEST = manifestPath;
    GLOVEBOX_BASE = label;
    HOME = "/home/glovebox";
    PATH = "/bin:/usr/bin";
    SSL_CERT_FILE = "/etc/ssl/certs/ca-bundle.crt";
    TZDIR = "${pkgs.tzdata}/share/zoneinfo";
    TMPDIR = "/tmp";
    LANG = "C.UTF-8";
  };
  badEnv = builtins.filter (k: builtins.elem k reserved) (builtins.attrNames env);
  allEnv = fixedEnv // common.env // chosen.env // env;

  config = {
    User = kitUser;
    WorkingDir = "/work";
    Entrypoint = [ "${kit}/bin/${kit.meta.mainProgram or "glovebox-kit"}" ];
    Env = lib.mapAttrsToList (k: v: "${k}=${toString v}") allEnv;
    ExposedPorts = {
      "8080/tcp" = { };
    };
    Labels = {
      "org.opencontainers.image.title" = name;
      "org.opencontainers.image.version" = version;
      "dev.glovebox.base" = label;
    };
  };

  # Runs under fakeroot in the customisation layer's root, so paths are
  # relative and chown is recorded in the layer's tar.
  fakeRootCommands =
    let
      quote = s: "'" + builtins.replaceStrings [ "'" ] [ "'\\''" ] s + "'";
    in
    lib.concatMapStringsSep "\n" (d: ''
      mkdir -p ${quote ".${d.path}"}
      chown ${d.owner} ${quote ".${d.path}"}
      chmod ${d.mode} ${quote ".${d.path}"}'') layout
    + ''

      cp ${sbom}/glovebox.json ${quote ".${manifestPath}"}
      cp ${sbom}/sbom.cdx.json ${quote ".${sbomPath}"}
      chmod 0444 ${quote ".${manifestPath}"} ${quote ".${sbomPath}"}
    '';

  # The image's closure is that of its contents and of its config (the
  # kit, TZDIR, a base's FONTCONFIG_FILE), as streamLayeredImage's own
  # is; the config file stands for the latter as its base.json does.
  sbom = import ./sbom.nix {
    inherit pkgs name sbomPath;
    manifest = manifestFile;
    version = tag;
    roots = contents ++ [ (pkgs.writeText "image-config.json" (builtins.toJSON config)) ];
    packages = contents ++ lib.optionals (pythonNames != [ ]) ([ pkgs.python3 ] ++ pythonSelect pkgs.python3.pkgs);
    tool = sbomTool;
  };

  packageName = p: (builtins.parseDrvName (p.name or "unknown")).name;
in
assert badEnv == [ ] || fail "env may not set ${lib.concatStringsSep ", " badEnv}";
# A malformed base spec or manifest fails here, not only when the image is
# built.
assert builtins.seq label (builtins.seq chosen.description (builtins.seq chosen.env (builtins.seq manifestFile true)));
pkgs.dockerTools.streamLayeredImage {
  inherit
    name
    tag
    contents
    config
    fakeRootCommands
    ;
  created = epoch;
  mtime = epoch;
  passthru.sbom = sbom;
  passthru.glovebox = {
    base = label;
    baseDescription = chosen.description;
    inherit
      version
      tag
      uid
      kitUser
      layout
      config
      manifestPath
      sbomPath
      ;
    packages = packages;
    pythonPackages = pythonNames;
    npm = if npm == null then null else (builtins.head npmPackages).name;
    contents = map packageName contents;
    env = allEnv;
  };
}
