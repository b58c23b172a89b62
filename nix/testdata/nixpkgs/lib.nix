# The subset of nixpkgs' lib that Glovebox's flakes use, with the same names
# and semantics.
let
  lib = {
    genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);

    attrByPath =
      attrPath: default: set:
      if attrPath == [ ] then
        set
      else
        let
          head = builtins.head attrPath;
        in
        if builtins.isAttrs set && set ? ${head} then
          lib.attrByPath (builtins.tail attrPath) default set.${head}
        else
          default;

    hasAttrByPath =
      attrPath: set:
      attrPath == [ ]
      || (
        builtins.isAttrs set
        && set ? ${builtins.head attrPath}
        && lib.hasAttrByPath (builtins.tail attrPath) set.${builtins.head attrPath}
      );

    escapeRegex = builtins.replaceStrings (map (c: c) [
      "\\" "[" "{" "(" ")" "^" "$" "?" "*" "+" "|" "."
    ]) (map (c: "\\" + c) [
      "\\" "[" "{" "(" ")" "^" "$" "?" "*" "+" "|" "."
    ]);

    splitString = sep: s: builtins.filter builtins.isString (builtins.split (lib.escapeRegex sep) s);

    concatStringsSep = builtins.concatStringsSep;
    concatMapStringsSep = sep: f: list: builtins.concatStringsSep sep (map f list);
    concatMap = builtins.concatMap;
    mapAttrsToList = f: set: map (n: f n set.${n}) (builtins.attrNames set);
    mapAttrs = builtins.mapAttrs;
    nameValuePair = name: value: { inherit name value; };
    mapAttrs' = f: set: builtins.listToAttrs (map (n: f n set.${n}) (builtins.attrNames set));
    filterAttrs =
      pred: set:
      builtins.listToAttrs (
        builtins.concatMap (n: if pred n set.${n} then [ { name = n; value = set.${n}; } ] else [ ]) (
          builtins.attrNames set
        )
      );
    attrNames = builtins.attrNames;
    attrValues = builtins.attrValues;
    elem = builtins.elem;
    filter = builtins.filter;
    unique = builtins.foldl' (acc: e: if builtins.elem e acc then acc else acc ++ [ e ]) [ ];
    optional = cond: x: if cond then [ x ] else [ ];
    optionals = cond: xs: if cond then xs else [ ];
    optionalAttrs = cond: set: if cond then set else { };
    optionalString = cond: s: if cond then s else "";
    hasPrefix = pre: s: builtins.substring 0 (builtins.stringLength pre) s == pre;
    hasSuffix =
      suf: s:
      let
        ls = builtins.stringLength s;
        lf = builtins.stringLength suf;
      in
      lf <= ls && builtins.substring (ls - lf) lf s == suf;
    removePrefix =
      pre: s:
      if lib.hasPrefix pre s then
        builtins.substring (builtins.stringLength pre) (builtins.stringLength s) s
      else
        s;
    removeSuffix =
      suf: s:
      if lib.hasSuffix suf s then builtins.substring 0 (builtins.stringLength s - builtins.stringLength suf) s else s;
    versionAtLeast = v1: v2: builtins.compareVersions v1 v2 >= 0;
    versionOlder = v1: v2: builtins.compareVersions v2 v1 > 0;
    makeBinPath = paths: builtins.concatStringsSep ":" (map (p: "${p}/bin") paths);
    getExe = drv: "${drv}/bin/${drv.meta.mainProgram}";
    fakeHash = "sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    id = x: x;
    isDerivation = x: builtins.isAttrs x && (x.type or null) == "derivation";
    assertMsg = pred: msg: pred || builtins.throw msg;
    throwIf = cond: msg: if cond then builtins.throw msg else x: x;
    trivial = {
      release = "26.05";
    };
    version = "26.05.0000000.stand-in";

    # nixpkgs returns a source object with an outPath; a filtered store path
    # behaves the same wherever it is interpolated.
    cleanSourceWith =
      {
        src,
        filter ? (_: _: true),
        name ? "source",
      }:
      builtins.path {
        path = src;
        inherit filter name;
      };
  };
in
lib
