#!/bin/sh
# Bootstrap the Debian bookworm base into a tarball that `docker import` turns into an image.
#
#   images/base/bootstrap.sh OUT.tar [MIRROR]
#
# Needs root and Debian's debootstrap. The packages are those of packages.txt beside this
# script; the image settings are changes.dockerfile, given to `docker import --change`.
set -eu
out=$1
mirror=${2:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)
packages=$(grep -v '^[[:space:]]*#' "$here/packages.txt" | grep -v '^[[:space:]]*$' | paste -sd, -)
root=$(mktemp -d "${TMPDIR:-/tmp}/epg-base-root.XXXXXX")
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include="$packages" bookworm "$root" "$mirror"
rm -rf "$root/var/cache/apt/archives" "$root/var/lib/apt/lists"
tar -C "$root" -cf "$out" .
