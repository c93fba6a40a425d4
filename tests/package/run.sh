#!/usr/bin/env bash
# Builds the packages from the debug build that scripts/test already made (stripped, as a
# release build would be), twice: as the workspace version and as a previous one, then installs
# and uses them (tests/package/test_install.py) under a virtual X display. Runs as root.
# Usage: tests/package/run.sh VENV
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${1:-.venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/baton-target}"
VERSION="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
# Sorts before VERSION for dpkg and rpm alike (the tilde), so installing VERSION is an upgrade.
PREVIOUS="${VERSION}~prev1"
DIST="$(mktemp -d)"
trap 'rm -rf "$DIST"; kill $xvfb 2>/dev/null || true' EXIT
scripts/package --profile dev --skip-build --version "$PREVIOUS" --out "$DIST" >/dev/null
scripts/package --profile dev --skip-build --out "$DIST" >/dev/null
chmod 755 "$DIST"
display=":$((80 + RANDOM % 9))"
# -ac: the test's fresh user connects to this display too.
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp -ac >/dev/null 2>&1 &
xvfb=$!
for _ in $(seq 50); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done
DISPLAY="$display" BATON_DIST="$DIST" BATON_VERSION="$VERSION" BATON_PREVIOUS_VERSION="$PREVIOUS" \
    FAKE_UPSTREAM_BIN="${FAKE_UPSTREAM_BIN:-$CARGO_TARGET_DIR/debug/fake-upstream}" \
    "$VENV/bin/pytest" -q tests/package
