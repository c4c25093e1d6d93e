# Sourced by the autopkgtests: fail on the first error, work in
# AUTOPKGTEST_TMP, and the helpers they share.
set -eu
work=${AUTOPKGTEST_TMP:?run by autopkgtest}
tests=$(pwd)/debian/tests

say() { printf '== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# A simulated Xen host in $1 with the domains of host.json: web01 (domid 7,
# 64-bit PV, 8160 pages) and db01 (domid 9, HVM, 4160 pages).
make_host() {
    rm -rf "$1"
    xen-dump-sim create "$1" "$tests/host.json"
}

# The value of the "KEY": NUMBER member of a flat JSON text on stdin.
json_number() {
    sed -n "s/.*\"$1\": *\([0-9][0-9]*\).*/\1/p" | head -n 1
}
