# The SBOM of an image, and its manifest stamped with the closure's
# provenance: glovebox-sbom (cmd/glovebox-sbom, internal/sbom) over the
# closureInfo of the image's roots and what evaluation knows of its
# packages.
#
# The closure, each store path's NAR hash and its references are known
# only when the image builds; pname, version and meta.license only at
# evaluation. So evaluation writes the metadata of the packages it has
# (the image's contents, the Python environment's packages) to a JSON
# file, keyed by each output's store path, and the build matches it to the
# closure: the paths evaluation described get names, versions, licenses
# and purls, the others (glibc, libraries pulled in by references) the name
# and version their store path spells.
#
# The output holds sbom.cdx.json (CycloneDX 1.6) and glovebox.json (the
# manifest with provenance.closure_sha256, closure_paths, sbom and
# sbom_sha256 added). mkBox copies both into /etc/glovebox and exposes the
# derivation as passthru.sbom (`nix build .#box-base.sbom`).
{
  pkgs,
  # The image's name and tag.
  name,
  version,
  # The closure's roots: the image's contents, and whatever its config
  # refers to.
  roots,
  # Derivations to describe (anything else in the list is skipped).
  packages,
  # The manifest to stamp (a path or a derivation).
  manifest,
  # The glovebox-sbom package.
  tool,
  # Where the image keeps the SBOM.
  sbomPath ? "/etc/glovebox/sbom.cdx.json",
}:
let
  inherit (pkgs) lib;

  # Store paths as plain strings: the metadata file names packages but
  # does not depend on them (the closureInfo does).
  str = s: builtins.unsafeDiscardStringContext (toString s);

  licenseOf =
    l:
    if builtins.isString l then
      { fullName = l; }
    else
      lib.filterAttrs (k: v: builtins.isString v) {
        spdxId = l.spdxId or null;
        fullName = l.fullName or l.shortName or null;
        url = l.url or null;
      };

  describe =
    p:
    let
      parsed = builtins.parseDrvName (p.name or "");
      homepage = p.meta.homepage or "";
      license = p.meta.license or [ ];
      description = p.meta.description or "";
      outputs = p.outputs or [ "out" ];
    in
    {
      pname = p.pname or parsed.name;
      version = p.version or parsed.version;
      description = if builtins.isString description then description else "";
      homepage =
        if builtins.isList homepage then
          (if homepage == [ ] then "" else builtins.head homepage)
        else if builtins.isString homepage then
          homepage
        else
          "";
      licenses = map licenseOf (if builtins.isList license then license else [ license ]);
      outputs = lib.genAttrs outputs (o: str (p.${o} or p).outPath);
    };

  quote = s: "'" + builtins.replaceStrings [ "'" ] [ "'\\''" ] s + "'";

  # "acme/box" names a store path "acme-box-sbom".
  baseName = builtins.replaceStrings [ "/" ":" "@" ] [ "-" "-" "-" ] name;

  meta = pkgs.writeText "${baseName}-sbom-meta.json" (
    builtins.toJSON {
      inherit name version;
      roots = map str roots;
      packages = map describe (builtins.filter lib.isDerivation packages);
    }
  );
in
pkgs.runCommand "${baseName}-sbom"
  {
    nativeBuildInputs = [ tool ];
    closure = pkgs.closureInfo { rootPaths = roots; };
    sbomMeta = meta;
    inherit manifest;
    passthru.glovebox = { inherit sbomPath; };
  }
  ''
    glovebox-sbom --closure "$closure" --meta "$sbomMeta" --manifest "$manifest" \
      --sbom-path ${quote sbomPath} --out "$out"
  ''
