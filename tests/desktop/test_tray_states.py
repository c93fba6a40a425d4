"""The tray tells the truth: in every provider state (ready, cooling by key, by model, by account,
breaker open, logged out, disabled, login-only) and while paused, the tray's look, its icon on screen and each
provider's menu line agree with what `/admin/state` says (the state the web UI's cards show) — and so do
`baton status` (its table, `--json` and exit status) and `baton statusline`, all renderings of the
gateway's one summary.

Each state is brought about the way it happens: cooldowns as `baton probe --apply` posts them, a
breaker opened by an upstream answering 500, a CLI whose login is gone, a toggle, a pause. The
tray's record of what it shows is its `tray shows` log line; the icon is read back from the
screen (the status dot's colour in the tray host)."""

import json
import re
import struct
import subprocess
import time

import os

import pytest

from test_desktop import (ARTIFACTS, FAKE_UPSTREAM, App, sh, start_trayer, tray_window, wait_for)

pytestmark = pytest.mark.skipif(not FAKE_UPSTREAM, reason="run through tests/desktop/run.sh")

# The status dot of each tray icon (src-tauri/icons/tray-*.png at 80 % of its width and
# height); the all-good icon has none, so the badge's blue shows there.
DOT = {"ok": (52, 87, 213), "cooling": (240, 160, 20), "down": (178, 38, 30), "paused": (120, 126, 140)}

# The menu line for each state of `/admin/state` (English); `{when}` is the state's end as
# `until()` writes it.
LINE = {
    "ready": r"ready",
    "partial": r"ready \(a key or model cooling\)",
    "login-only": r"login-only",
    "cooling": r"cooling until {when}",
    "breaker-open": r"breaker open until {when}",
    "logged-out": r"logged out",
    "unavailable": r"unavailable",
    "disabled": r"disabled",
}


def icon_colour(win):
    """The colour at 80 % of the tray icon's width and height, read from an `xwd` dump."""
    raw = subprocess.run(["xwd", "-id", win, "-silent"], capture_output=True, check=True).stdout
    f = struct.unpack(">25I", raw[:100])
    header, width, height, order, bpp, stride, ncolours = f[0], f[4], f[5], f[7], f[11], f[12], f[19]
    assert bpp == 32, f"an xwd dump of {bpp} bits per pixel"
    x, y = int(width * 0.8), int(height * 0.8)
    at = header + ncolours * 12 + y * stride + x * 4
    pixel = int.from_bytes(raw[at:at + 4], "little" if order == 0 else "big")
    return (pixel >> 16) & 255, (pixel >> 8) & 255, pixel & 255


def nearest_look(rgb):
    return min(DOT, key=lambda k: sum((a - b) ** 2 for a, b in zip(DOT[k], rgb)))


def tray_shows(app):
    """The last `tray shows` record: (look, {provider id: its menu line})."""
    lines = [l for l in (app.tmp / "app.log").read_text().splitlines() if "tray shows" in l]
    if not lines:
        return None, {}
    last = re.sub(r"\x1b\[[0-9;]*m", "", lines[-1])
    look = re.search(r"look=(\w+)", last).group(1)
    providers = re.search(r"providers=(.*)$", last).group(1)
    items = [p.split(":", 1) for p in providers.split(" | ") if ":" in p]
    return look, {k: v.strip() for k, v in items if k not in ("lang", "connected")}


MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def until(ms):
    """A state's end as the tray writes it (`i18n::clock_time`, English, 24-hour clock): its
    local clock time, with its date when that is another day ("Dec 8, 00:01"). Either form of
    this very time: the day may turn between this read and the tray's."""
    if ms is None:
        return "(?!)"
    t = time.localtime(ms / 1000)
    clock = f"{t.tm_hour:02}:{t.tm_min:02}"
    date = re.escape(f"{MONTHS[t.tm_mon - 1]} {t.tm_mday}, ")
    return f"(?:{date})?{clock}"


def untils(app):
    """Each provider's `untilMs` in `/admin/state` (None when it has no end)."""
    _, _, body = app.request("/admin/state", admin=True)
    return {p["id"]: p["status"].get("untilMs") for p in json.loads(body)["providers"]}


def gateway_view(app):
    """What `/admin/state` says: paused, and each provider's state (with `partial` and
    `login-only` folded in)."""
    _, _, body = app.request("/admin/state", admin=True)
    state = json.loads(body)
    views = {}
    for p in state["providers"]:
        s = p["status"]
        state_ = s["state"]
        if state_ == "ready" and s.get("loginOnly"):
            state_ = "login-only"
        elif state_ == "ready" and s["partial"]:
            state_ = "partial"
        views[p["id"]] = (state_, p["enabled"])
    return state["paused"], views


BATON = os.environ.get("BATON_BIN", "")


def cli_view(app):
    """What `baton status --json` says (paused, servable, each provider's state), its exit
    status, and the status line `baton statusline` prints."""
    args = ["--url", app.url, "--admin-key", app.admin_key]
    run = subprocess.run([BATON, "status", "--json", *args], capture_output=True, text=True, timeout=30)
    status = json.loads(run.stdout)
    line = subprocess.run([BATON, "statusline", *args], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL).stdout.strip()
    return status, run.returncode, line


def summary_view(app):
    _, _, body = app.request("/admin/state", admin=True)
    return json.loads(body)["summary"]


def cli_agrees(app, name):
    """`baton status --json`, its exit status and `baton statusline` say what the gateway's
    summary says: the same paused, servable, serving, and each provider's state."""
    if not BATON:
        return
    seen = {}

    def same():
        s = summary_view(app)
        status, code, line = cli_view(app)
        seen.update(summary=s, status=status, code=code, line=line)
        states = {p["id"]: p["shown"] for p in s["providers"]}
        if {r["id"]: r["state"] for r in status["providers"]} != states:
            return None
        if (status["paused"], status["servable"], status["serving"]) != (s["paused"], s["servable"], s.get("serving")):
            return None
        if code != (0 if s["servable"] else 1):
            return None
        names = {p["id"]: p["name"] for p in s["providers"]}
        serving = s.get("serving") or s.get("servingLogin")
        if s["paused"] != ("paused" in line.split(" · ")):
            return None
        if serving and names[serving] not in line:
            return None
        if not serving and "nothing available" not in line:
            return None
        return True

    assert wait_for(same, timeout=15, fail=False), f"{name}: the CLI and the summary disagree: {seen}"


def expected_look(paused, views):
    if paused:
        return "paused"
    enabled = [s for s, on in views.values() if on]
    usable = [s for s in enabled if s in ("ready", "partial", "login-only")]
    if not usable:
        return "down"
    return "ok" if len(usable) == len(enabled) else "cooling"


def agree(app, want, name):
    """Waits until `/admin/state` says `want` (provider → state), then until the tray shows what
    `/admin/state` says (both read afresh: a breaker's or cooldown's end may come between),
    then checks the icon on screen and keeps a screenshot of the tray."""
    # The gateway first: a CLI's login check at start, or a cooldown's event, may take a moment.
    said = wait_for(lambda: all(gateway_view(app)[1][pid][0] == st for pid, st in want.items()),
                    timeout=15, fail=False)
    assert said, f"{name}: /admin/state says {gateway_view(app)}, not {want}"
    seen = {}

    def same():
        paused, views = gateway_view(app)
        shown, lines = tray_shows(app)
        seen.update(gateway=(paused, views), tray=(shown, lines))
        # The summary's own look is the tray's, and the one these states make.
        if shown != expected_look(paused, views) or shown != summary_view(app)["look"] or set(lines) != set(views):
            return None
        ends = untils(app)
        if not all(re.fullmatch(LINE[views[pid][0]].replace("{when}", until(ends.get(pid))), lines[pid])
                   for pid in views):
            return None
        return shown

    look = wait_for(same, timeout=15, fail=False)
    assert look, f"{name}: the tray and /admin/state disagree: {seen}"
    cli_agrees(app, name)
    tray = wait_for(tray_window, timeout=10, what="the tray icon")
    # The icon is replaced with the menu: give the tray host a moment to paint it.
    on_screen = wait_for(lambda: nearest_look(icon_colour(tray)) == look, timeout=5, fail=False)
    assert on_screen, f"{name}: the tray shows {look} but its icon's dot is {icon_colour(tray)}"
    sh("scrot", "-o", str(ARTIFACTS / f"tray-state-{name}.png"))


def cool(app, provider, until_ms, key=None, model=None, cls="rate"):
    status, _, body = app.request("/admin/cooldowns", {"provider": provider, "key": key, "model": model,
                                                       "untilMs": until_ms, "class": cls,
                                                       "reason": "429 from the test"}, admin=True)
    assert status == 201, body


def test_the_tray_agrees_with_the_gateway_in_every_provider_state(tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    app = App(tmp_path)
    flaky = subprocess.Popen([FAKE_UPSTREAM, "--name", "flaky", "--mode", "500"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    flaky_url = re.search(r"listening on (http://\S+)", flaky.stdout.readline()).group(1)
    up = app.upstream_url
    (tmp_path / "claude" / "modes").write_text("nologin\n")
    key = [{"env": "BT_DESKTOP_GROQ_KEY"}]
    app.config.write_text(json.dumps({
        "server": {"port": 0},
        "providers": [
            {"id": "keys", "kind": "openai-compatible", "baseUrl": up + "/v1", "models": ["llama"],
             "keys": [{"env": "BT_DESKTOP_GROQ_KEY"}, {"env": "BT_DESKTOP_GROQ_KEY_2"}], "priority": 1},
            {"id": "models", "kind": "openai-compatible", "baseUrl": up + "/v1", "models": ["small", "large"],
             "keys": key, "priority": 2},
            {"id": "account", "kind": "anthropic", "baseUrl": up + "/v1", "models": ["*"], "credentials": "client",
             "priority": 3},
            {"id": "flaky", "kind": "openai-compatible", "baseUrl": flaky_url + "/v1", "models": ["m"],
             "keys": key, "priority": 4, "auto": False},
            {"id": "claude-code", "kind": "claude-cli", "executable": str(tmp_path / "bin" / "claude"),
             "models": ["sonnet"], "priority": 5},
            {"id": "codex", "kind": "codex-cli", "executable": str(tmp_path / "bin" / "codex"),
             "models": ["gpt-5"], "priority": 6},
        ],
    }))
    app.env["BT_DESKTOP_GROQ_KEY_2"] = "gsk-second-from-the-shell"
    trayer = start_trayer() if tray_window() is None else None
    try:
        app.start()
        hour = int(time.time() * 1000) + 3_600_000
        agree(app, {"keys": "ready", "models": "ready", "account": "login-only", "flaky": "ready",
                    "claude-code": "logged-out", "codex": "ready"}, "logged-out")

        # Cooling by key: one of two keys is partial, both is the provider cooling.
        cool(app, "keys", hour, key="env:BT_DESKTOP_GROQ_KEY")
        agree(app, {"keys": "partial"}, "one-key-cooling")
        cool(app, "keys", hour, key="env:BT_DESKTOP_GROQ_KEY_2")
        agree(app, {"keys": "cooling"}, "every-key-cooling")

        # Cooling by model: one of two models, then both.
        cool(app, "models", hour, model="small")
        agree(app, {"models": "partial"}, "one-model-cooling")
        cool(app, "models", hour, model="large", cls="overloaded")
        agree(app, {"models": "cooling"}, "every-model-cooling")

        # Cooling by account: the client's own login capped (how a subscription cap records it).
        cool(app, "account", hour, key="client:16e89a16dc0f")
        agree(app, {"account": "cooling"}, "account-cooling")

        # Breaker open: transient failures in a row.
        for _ in range(6):
            app.request("/v1/chat/completions", {"model": "flaky/m", "messages": [{"role": "user", "content": "hi"}]})
            if gateway_view(app)[1]["flaky"][0] == "breaker-open":
                break
        agree(app, {"flaky": "breaker-open"}, "breaker-open")

        # Disabled: the last ready provider off leaves nothing usable.
        status, _, body = app.request("/admin/providers/codex", {"enabled": False}, method="PATCH", admin=True)
        assert status == 200, body
        agree(app, {"codex": "disabled"}, "nothing-usable")

        # Paused wins over everything, and resuming gives back the look before.
        assert app.request("/admin/pause", {"paused": True}, method="PUT", admin=True)[0] == 200
        agree(app, {}, "paused")
        assert app.request("/admin/pause", {"paused": False}, method="PUT", admin=True)[0] == 200
        agree(app, {"codex": "disabled"}, "resumed")

        # Cooldowns cleared: back to the first state, look and icon included.
        assert app.request("/admin/cooldowns?provider=keys", method="DELETE", admin=True)[0] in (200, 204)
        assert app.request("/admin/providers/codex", {"enabled": True}, method="PATCH", admin=True)[0] == 200
        agree(app, {"keys": "ready", "codex": "ready"}, "cleared")

        # Every cooldown cleared and the providers that cannot serve turned off: all good.
        assert app.request("/admin/cooldowns", method="DELETE", admin=True)[0] in (200, 204)
        for pid in ("flaky", "claude-code"):
            assert app.request(f"/admin/providers/{pid}", {"enabled": False}, method="PATCH", admin=True)[0] == 200
        agree(app, {"keys": "ready", "models": "ready", "account": "login-only", "flaky": "disabled",
                    "claude-code": "disabled", "codex": "ready"}, "all-good")
    finally:
        if app.proc and app.proc.poll() is None:
            app.proc.terminate()
            app.proc.wait(15)
        app.upstream.terminate()
        flaky.terminate()
        if trayer:
            trayer.terminate()
