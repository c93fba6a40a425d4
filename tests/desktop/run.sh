#!/usr/bin/env bash
# Runs the desktop app's tests on a machine without a desktop: a virtual X display (Xvfb) and a
# private D-Bus session; the tests start a notification daemon (dunst) and a tray host (trayer)
# themselves. Needs scripts/desktop-deps --test, the built baton-desktop and fake-cli, and a
# Python venv with pytest. Usage: tests/desktop/run.sh VENV [pytest arguments, e.g. -k tray]
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${1:-.venv}"
# The tray and notifications speak the system's language: English with a 24-hour clock here
# (one test sets Japanese for itself).
export LANG=C.UTF-8
unset LANGUAGE LC_ALL LC_MESSAGES
display=":$((90 + RANDOM % 9))"
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null || true' EXIT
for _ in $(seq 50); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done
DISPLAY="$display" dbus-run-session -- "$VENV/bin/pytest" -q tests/desktop "${@:2}"
