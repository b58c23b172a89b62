# The base image: what every box has, whatever its base. A shell and the
# usual userland for the exec agent and for agents' tools, curl, CA
# certificates and time zones. mkBox adds the kit and the glovebox user.
{ pkgs }:
{
  description = "shell, coreutils, curl, CA certificates, time zones";
  packages = with pkgs; [
    bashInteractive # /bin/sh and /bin/bash
    coreutils
    findutils
    diffutils
    gnugrep
    gnused
    gawk
    gnutar
    gzip
    xz
    which
    less
    procps
    curl
    tzdata
    dockerTools.caCertificates # /etc/ssl/certs/ca-bundle.crt; not cacert too, they collide
    dockerTools.usrBinEnv # /usr/bin/env for #! lines
  ];
  pythonPackages = [ ];
  env = { };
}
