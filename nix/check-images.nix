# checks.<system>.images: evaluates every image and asserts what all boxes
# promise (user, directories and modes, entrypoint, port, manifest, env,
# SBOM).
# Building it only writes the facts it checked; the images themselves are
# built by `nix build .#box-<base>`.
{ pkgs, images }:
let
  inherit (pkgs) lib;

  check =
    base: image:
    let
      g = image.passthru.glovebox;
      c = g.config;
      dir = path: builtins.head (builtins.filter (d: d.path == path) g.layout ++ [ { owner = "missing"; mode = "missing"; } ]);
      ownedBy10001 = path: (dir path).owner == "10001:10001";
      has = entry: builtins.elem entry c.Env;
      req = cond: msg: lib.assertMsg cond "glovebox image ${base}: ${msg}";
    in
    assert req (c.User == "0:0") "User is ${c.User}, want 0:0: the kit starts as root and runs agents under their own uids";
    assert req (builtins.all ownedBy10001 [ "/work" "/input" "/output" "/var/glovebox" ]) "/work /input /output /var/glovebox must belong to 10001";
    assert req ((dir "/tmp").mode == "1777") "/tmp must be 1777";
    assert req (c.ExposedPorts ? "8080/tcp") "8080/tcp must be exposed";
    assert req (!(builtins.any (lib.hasPrefix "GLOVEBOX_PORT=") c.Env)) "GLOVEBOX_PORT must not be set: it would hide the platform's $PORT (the kit defaults to 8080)";
    assert req (has "GLOVEBOX_MANIFEST=/etc/glovebox/glovebox.json") "GLOVEBOX_MANIFEST must be /etc/glovebox/glovebox.json";
    assert req (builtins.length c.Entrypoint == 1 && lib.hasSuffix "/bin/glovebox-kit" (builtins.head c.Entrypoint)) "the entrypoint must be the kit";
    assert req (g.sbomPath or null == "/etc/glovebox/sbom.cdx.json" && image ? sbom) "the image must carry its SBOM at /etc/glovebox/sbom.cdx.json (passthru.sbom)";
    assert req (g.base == base) "built from base ${g.base}";
    {
      inherit (g) base contents;
      inherit (c) User Env;
    };

  facts = lib.mapAttrs check images;
in
pkgs.writeText "glovebox-image-checks.json" (builtins.unsafeDiscardStringContext (builtins.toJSON facts))
