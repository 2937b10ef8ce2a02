#!/bin/sh
# Bootstrap a Debian base (bookworm by default, or trixie) into a tarball that `docker import` turns into an image.
#
#   images/base/bootstrap.sh OUT.tar [MIRROR] [SUITE]
#
# Needs root and Debian's debootstrap. The packages are those of packages-SUITE.txt beside this
# script; the image settings are changes.dockerfile, given to `docker import --change`.
set -eu
out=$1
mirror=${2:-http://deb.debian.org/debian}
suite=${3:-bookworm}
here=$(cd "$(dirname "$0")" && pwd)
list="$here/packages-$suite.txt"
[ -f "$list" ] || { echo "no package list $list for the suite $suite" >&2; exit 2; }
packages=$(grep -v '^[[:space:]]*#' "$list" | grep -v '^[[:space:]]*$' | paste -sd, -)
root=$(mktemp -d "${TMPDIR:-/tmp}/epg-base-root.XXXXXX")
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror"
rm -rf "$root/var/cache/apt/archives" "$root/var/lib/apt/lists"
tar -C "$root" -cf "$out" .
