"""The real desktop app under Xvfb with a real notification daemon (dunst) and tray host
(trayer): the gateway serves while the tray app runs, a subscription-limit failover makes exactly
one notification, start at login writes and removes its autostart entry, a second launch starts
no second gateway, and Quit from the tray menu exits cleanly with the request log flushed.

Run through tests/desktop/run.sh (it provides the display and the D-Bus session). Needs
BATON_DESKTOP_BIN and FAKE_CLI_BIN; screenshots go to tests/desktop/artifacts/."""

import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE / "artifacts"
DESKTOP = os.environ.get("BATON_DESKTOP_BIN", "")
FAKE_CLI = os.environ.get("FAKE_CLI_BIN", "")
FAKE_UPSTREAM = os.environ.get("FAKE_UPSTREAM_BIN", "")

pytestmark = pytest.mark.skipif(
    not (DESKTOP and FAKE_CLI and FAKE_UPSTREAM and os.environ.get("DISPLAY")),
    reason="run through tests/desktop/run.sh with BATON_DESKTOP_BIN, FAKE_CLI_BIN and FAKE_UPSTREAM_BIN",
)


def wait_for(pred, timeout=15.0, step=0.1, what="condition", fail=True):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    if not fail:
        return None
    raise AssertionError(f"timed out waiting for {what}")


def sh(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


class App:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.home = tmp / "home"
        self.data = tmp / "data"
        self.home.mkdir()
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        for cli in ("claude", "codex"):
            shutil.copy(FAKE_CLI, bin_dir / cli)
            (tmp / cli).mkdir()
        (tmp / "claude" / "modes").write_text("limit-soon\n")
        (tmp / "codex" / "modes").write_text("ok\n")
        # A free-tier API whose per-minute limits must not notify.
        self.upstream = subprocess.Popen([FAKE_UPSTREAM, "--name", "groq", "--mode", "ok"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = wait_for(lambda: self.upstream.stdout.readline(), timeout=20, what="the fake upstream")
        self.upstream_url = re.search(r"listening on (http://\S+)", line).group(1)
        self.config = tmp / "config.json"
        self.config.write_text(json.dumps({
            "server": {"port": 0},
            "routes": {"short": ["groq", "codex"]},
            "providers": [
                {"id": "groq", "name": "Groq", "kind": "openai-compatible", "baseUrl": self.upstream_url + "/v1",
                 "models": ["llama"], "priority": 3, "auto": False, "keys": [{"env": "BT_DESKTOP_GROQ_KEY"}]},
                {"id": "claude-code", "name": "Claude Code", "kind": "claude-cli",
                 "executable": str(bin_dir / "claude"), "models": ["sonnet"], "priority": 1},
                {"id": "codex", "name": "Codex", "kind": "codex-cli",
                 "executable": str(bin_dir / "codex"), "models": ["gpt-5"], "priority": 2},
            ],
        }))
        self.env = {**os.environ, "HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config"),
                    "BATON_LOG": "info", "BT_DESKTOP_GROQ_KEY": "gsk-from-the-shell"}
        self.proc = None
        self.url = None

    def args(self):
        return [DESKTOP, "--config", str(self.config), "--data-dir", str(self.data)]

    def start(self):
        self.log = open(self.tmp / "app.log", "w")
        self.proc = subprocess.Popen(self.args(), env=self.env, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = wait_for(lambda: self.proc.stdout.readline(), timeout=60, what="the app to listen")
        m = re.search(r"listening on (http://\S+)", line)
        assert m, line
        self.url = m.group(1)
        self.gateway_key = (self.data / "gateway.key").read_text().strip()
        self.admin_key = (self.data / "admin.key").read_text().strip()

    def request(self, path, body=None, key=None, method=None, admin=False):
        headers = {"content-type": "application/json"}
        if admin:
            headers["x-admin-key"] = self.admin_key
        else:
            headers["authorization"] = f"Bearer {key or self.gateway_key}"
        req = urllib.request.Request(self.url + path, data=None if body is None else json.dumps(body).encode(),
                                     headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def chat(self):
        return self.request("/v1/chat/completions", {"model": "auto", "messages": [{"role": "user", "content": "hi"}]})


_SEEN = 0  # the newest dunst id forgotten by clear_notifications()


def _history():
    out = sh("dunstctl", "history").stdout
    if not out.strip():
        return []
    return json.loads(out)["data"][0]


def clear_notifications():
    """dunst 1.9 has no `history-clear`: close what is shown and forget every id up to now."""
    global _SEEN
    sh("dunstctl", "close-all")
    time.sleep(0.2)
    _SEEN = max([_SEEN] + [n["id"]["data"] for n in _history()])


def notifications():
    """Closed notifications in dunst's history since the last clear (only closed ones reach it)."""
    sh("dunstctl", "close-all")
    time.sleep(0.2)
    return [{"summary": n["summary"]["data"], "body": n["body"]["data"], "app": n["appname"]["data"],
             "icon": n.get("icon_path", {}).get("data", "")}
            for n in _history() if n["id"]["data"] > _SEEN]


def _notifier_pid():
    """The pid owning org.freedesktop.Notifications, asked without D-Bus activation (which would
    start a second dunst from its service file, one this module does not control)."""
    out = sh("dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
             "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.freedesktop.Notifications").stdout
    m = re.search(r"uint32 (\d+)", out)
    return int(m.group(1)) if m else None


def start_dunst():
    """A notification daemon of this test's own: stopped by stop_dunst, so none outlives a test."""
    global _SEEN
    d = subprocess.Popen(["dunst"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: _notifier_pid() == d.pid, what="dunst to own the notification service")
    _SEEN = 0  # a new daemon counts from 1
    clear_notifications()
    return d


def stop_dunst(d):
    d.terminate()
    d.wait(5)
    wait_for(lambda: _notifier_pid() is None, what="no notification daemon")


def tray_window():
    """The tray icon's window inside the tray host (XEmbed): class `tray-icon tray app main`."""
    out = sh("xdotool", "search", "--class", "tray-icon tray app").stdout.split()
    return out[0] if out else None


def test_without_a_tray_host_the_window_opens_and_says_why(tmp_path):
    """Runs first, before the module's tray host (trayer) starts: with a provider configured the
    window would stay hidden behind a tray icon nobody can see; instead it opens after a grace
    period, and a notification says why. (Closing it then minimises it; Xvfb has no window
    manager to minimise with, so that part is not checked here.)"""
    ARTIFACTS.mkdir(exist_ok=True)
    assert tray_window() is None
    dunst = start_dunst()
    app = App(tmp_path)
    try:
        app.start()
        assert visible_window() is None, "at first, like any start with providers"
        win = wait_for(visible_window, timeout=20, what="the window, for want of a tray")
        said = wait_for(lambda: [n for n in notifications() if "no tray" in n["summary"]],
                        timeout=10, what="the notification")
        assert "closing it minimises it" in said[0]["body"], said
        # The gateway serves (health, not a chat: a chat here would fail over and notify, and
        # that notification could outlive this test's daemon into the next one's).
        assert win and app.request("/health")[0] == 200
        time.sleep(3)  # let the web view paint
        sh("scrot", "-o", str(ARTIFACTS / "no-tray-host.png"))
    finally:
        if app.proc and app.proc.poll() is None:
            app.proc.terminate()
            app.proc.wait(15)
        app.upstream.terminate()
        stop_dunst(dunst)


def start_trayer():
    """A tray host (XEmbed) at the top right of the virtual screen."""
    return subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--widthtype", "request",
                             "--height", "32", "--SetDockType", "true"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# A Japanese desktop's locale (nothing more specific set).
JAPANESE = {"LANG": "ja_JP.UTF-8", "LANGUAGE": "", "LC_ALL": "", "LC_MESSAGES": ""}


@pytest.fixture(scope="module")
def desktop(tmp_path_factory):
    ARTIFACTS.mkdir(exist_ok=True)
    tmp = tmp_path_factory.mktemp("desktop")
    dunst = start_dunst()
    trayer = start_trayer()
    app = App(tmp)
    app.start()
    yield app
    if app.proc.poll() is None:
        app.proc.terminate()
        app.proc.wait(10)
    app.upstream.terminate()
    trayer.terminate()
    stop_dunst(dunst)


def test_gateway_serves_and_a_limit_failover_notifies_exactly_once(desktop):
    clear_notifications()
    status, headers, _ = desktop.chat()
    assert status == 200
    assert headers.get("x-gateway-provider") == "codex"
    found = wait_for(lambda: [n for n in notifications() if n["app"] == "Baton"], timeout=10, what="a notification")
    assert len(found) == 1, found
    n = found[0]
    assert n["summary"] == "Baton switched providers"
    # A clock time, with its date only when the reset falls on another day (late in the evening
    # the hour-long limit ends tomorrow): this passes at any time of day.
    m = re.match(r"Claude Code session limit reached — back at (?:(\w{3} \d{1,2}), )?\d\d:\d\d; now using Codex$",
                 n["body"])
    assert m, n["body"]
    if m.group(1):
        assert m.group(1) != time.strftime("%b %-d"), f"a date is named only for another day: {n['body']}"
    # The same episode: Claude is cooling, skipped, and nothing new is said.
    for _ in range(3):
        status, headers, _ = desktop.chat()
        assert headers.get("x-gateway-provider") == "codex"
    time.sleep(1.5)
    assert [x for x in notifications() if x["app"] == "Baton"] == found


def test_a_short_rate_limit_is_folded_into_the_tray_not_notified(desktop):
    clear_notifications()
    # Groq answers 429 with Retry-After: 30 once; the route moves on to Codex.
    req = urllib.request.Request(desktop.upstream_url + "/_script", data=json.dumps(["429"]).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    urllib.request.urlopen(req, timeout=5).read()
    status, headers, _ = desktop.request("/v1/chat/completions", {"model": "short", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200 and headers.get("x-gateway-provider") == "codex"
    log = desktop.tmp / "app.log"
    assert wait_for(lambda: "cooldown started provider=groq" in log.read_text(), timeout=5, what="groq's cooldown")
    time.sleep(2)  # longer than a burst's folding window
    after = notifications()
    assert after == [], f"a 30 s limit does not notify: {after}"
    # It shows in the tray's state instead.
    _, _, body = desktop.request("/admin/providers", admin=True)
    groq = next(p for p in json.loads(body)["providers"] if p["id"] == "groq")
    assert groq["cooldowns"], "groq is cooling"


def test_start_at_login_writes_and_removes_the_autostart_entry(desktop):
    entry = desktop.home / ".config" / "autostart" / "Baton.desktop"
    status, _, body = desktop.request("/admin/desktop", admin=True)
    assert status == 200 and json.loads(body)["present"] is True
    # An entry left by a start with another data directory would start that setup, not this
    # one: it does not count as on, here or in the tray.
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(f"[Desktop Entry]\nType=Application\nName=Baton\nExec={DESKTOP} --data-dir /elsewhere\n")
    status, _, body = desktop.request("/admin/desktop", admin=True)
    assert json.loads(body)["autostart"] is False, body
    tray = wait_for(tray_window, timeout=15, what="the tray icon")
    time.sleep(6)  # the tray looks again every 5 s
    open_menu(tray)
    time.sleep(0.3)
    sh("scrot", "-o", str(ARTIFACTS / "tray-autostart-other-setup.png"))
    sh("xdotool", "key", "Escape")
    # Turning it on points the entry at this setup.
    status, _, body = desktop.request("/admin/desktop", {"autostart": True}, method="PUT", admin=True)
    assert status == 200, body
    assert json.loads(body)["autostart"] is True
    assert entry.exists(), list((desktop.home / ".config").rglob("*"))
    text = entry.read_text()
    assert "baton-desktop" in text
    # After a login it starts with the same setup: config file, data directory (so the same
    # gateway key), as absolute paths.
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    assert f"--config {desktop.config.resolve()}" in exec_line, exec_line
    assert f"--data-dir {desktop.data.resolve()}" in exec_line, exec_line
    status, _, body = desktop.request("/admin/desktop", {"autostart": False}, method="PUT", admin=True)
    assert json.loads(body)["autostart"] is False
    assert not entry.exists()


def visible_window():
    """The app window (title Baton, 480 px wide) when it is mapped."""
    for w in sh("xdotool", "search", "--onlyvisible", "--name", "^Baton$").stdout.split():
        if "480x" in sh("xdotool", "getwindowgeometry", w).stdout:
            return w
    return None


def open_menu(tray):
    sh("xdotool", "mousemove", "--window", tray, "8", "8", "click", "1")

    def menu():
        for w in sh("xdotool", "search", "--onlyvisible", "--class", "baton-desktop").stdout.split():
            m = re.search(r"Geometry: (\d+)x(\d+)", sh("xdotool", "getwindowgeometry", w).stdout)
            # The menu: a popup taller than a line, narrower than the 480 px window.
            if m and int(m.group(2)) > 100 and int(m.group(1)) < 470:
                return w
        return None

    return wait_for(menu, timeout=15, what="the tray menu")


def pick(desktop, tray, keys, item):
    """Opens the tray menu, presses `keys` and waits for the app to log `item` as chosen. The
    menu is replaced when the items it shows change (a provider added), which closes it under
    the keys, as it would under a user's pointer: then, like the user, it tries again."""
    log = desktop.tmp / "app.log"
    mark = f'item="{item}"'
    for _ in range(3):
        before = log.read_text().count(mark)
        open_menu(tray)
        time.sleep(0.3)
        sh("xdotool", "key", *keys)
        if wait_for(lambda: log.read_text().count(mark) > before or None, timeout=5, what=mark, fail=False):
            return
        sh("xdotool", "key", "Escape")
    raise AssertionError(f"the tray menu did not take {item}")


def test_tray_menu_opens_the_window(desktop):
    tray = wait_for(tray_window, timeout=15, what="the tray icon")
    assert visible_window() is None, "the window starts hidden in the tray"
    open_menu(tray)
    time.sleep(0.5)
    sh("scrot", "-o", str(ARTIFACTS / "tray-menu.png"))
    # Open Baton: the first item that can be chosen (the status line above it cannot).
    sh("xdotool", "key", "Down", "Return")
    wait_for(visible_window, timeout=10, what="the window to open")


def choose(desktop, tray, downs, item):
    """Takes the tray menu's item `downs` steps down (1 = Open Baton), which the app logs as `item`."""
    pick(desktop, tray, ["Down"] * downs + ["Return"], item)
    time.sleep(0.8)


def test_pause_and_start_at_login_from_the_tray(desktop):
    tray = wait_for(tray_window, timeout=15, what="the tray icon")
    choose(desktop, tray, 4, "pause")
    status, _, body = desktop.chat()
    assert status == 503 and b"paused" in body, body
    choose(desktop, tray, 4, "pause")  # now Resume routing
    assert desktop.chat()[0] == 200
    entry = desktop.home / ".config" / "autostart" / "Baton.desktop"
    choose(desktop, tray, 5, "autostart")
    assert wait_for(entry.exists, timeout=5, what="the autostart entry")
    # This binary runs from the build directory, so the tray says `cargo clean` would break
    # it (and the notification is closed, so later tests see only their own).
    shown = notifications()
    warned = [n for n in shown if "build directory" in n["summary"]]
    assert warned and "cargo clean" in warned[0]["body"], shown
    # The Groq key comes from the shell's environment, which a login start does not have.
    missing = [n for n in shown if "keys may be missing" in n["summary"]]
    assert missing and "BT_DESKTOP_GROQ_KEY" in missing[0]["body"], shown
    assert "gsk-from-the-shell" not in missing[0]["body"]
    # A provider of the config file cannot take a pasted key: the warning does not offer it.
    assert "Providers → Edit" not in missing[0]["body"], missing[0]["body"]
    _, _, body = desktop.request("/admin/desktop", admin=True)
    assert json.loads(body)["autostart"] is True, "the UI sees what the tray set"
    choose(desktop, tray, 5, "autostart")
    assert wait_for(lambda: not entry.exists(), timeout=5, what="the entry to go")


def test_an_open_tray_menu_stays_open_while_what_it_shows_changes(desktop):
    """A pause from elsewhere (or a cooldown ending) is written into the menu the user has open:
    it does not close under the pointer, and the item under the keys does what it now says."""
    tray = wait_for(tray_window, timeout=15, what="the tray icon")
    log = desktop.tmp / "app.log"
    paused_before = log.read_text().count("look=paused")
    chosen_before = log.read_text().count('item="pause"')
    resumed_before = log.read_text().count("routing resumed")
    menu = open_menu(tray)
    time.sleep(0.3)
    sh("xdotool", "key", "Down", "Down", "Down", "Down")  # on Pause routing
    status, _, body = desktop.request("/admin/pause", {"paused": True}, method="PUT", admin=True)
    assert status == 200, body
    assert wait_for(lambda: log.read_text().count("look=paused") > paused_before, timeout=10,
                    what="the tray to show the pause")
    time.sleep(0.5)
    visible = sh("xdotool", "search", "--onlyvisible", "--class", "baton-desktop").stdout.split()
    assert menu in visible, "the open menu was closed by the change"
    sh("scrot", "-o", str(ARTIFACTS / "tray-menu-changed-while-open.png"))
    sh("xdotool", "key", "Return")  # the same item, which now says Resume routing
    assert wait_for(lambda: log.read_text().count('item="pause"') > chosen_before, timeout=5,
                    what="the item to be chosen")
    assert wait_for(lambda: log.read_text().count("routing resumed") > resumed_before, timeout=5,
                    what="routing to resume")
    assert desktop.chat()[0] == 200


def provider(desktop, pid):
    _, _, body = desktop.request("/admin/providers", admin=True)
    return next(p for p in json.loads(body)["providers"] if p["id"] == pid)


def order(desktop):
    _, _, body = desktop.request("/admin/providers", admin=True)
    return [p["id"] for p in json.loads(body)["providers"]]


def provider_item(tray, index, keys, shot=None):
    """Opens the tray menu's Providers submenu (below Start at login), then the submenu of the
    provider at `index`, and presses `keys` there."""
    open_menu(tray)
    time.sleep(0.3)
    sh("xdotool", "key", *(["Down"] * 6), "Right")
    time.sleep(0.3)
    sh("xdotool", "key", *(["Down"] * index), "Right")
    time.sleep(0.4)
    if shot:
        sh("scrot", "-o", str(ARTIFACTS / shot))
    sh("xdotool", "key", *keys)
    time.sleep(0.8)


def test_the_tray_lists_providers_with_their_state_and_acts_on_them(desktop):
    tray = wait_for(tray_window, timeout=15, what="the tray icon")
    clear_notifications()
    # Claude Code is cooling since the first test's session limit.
    assert provider(desktop, "claude-code")["cooldowns"], "cooling before"
    # First provider: "Use first" is off (it is first), so Down lands on Clear cooldown.
    provider_item(tray, 0, ["Down", "Return"], shot="tray-providers.png")
    assert wait_for(lambda: not provider(desktop, "claude-code")["cooldowns"], timeout=5, what="the cooldown to clear")
    # Its "back" notification opens the Providers screen when clicked.
    wait_for(lambda: int(sh("dunstctl", "count", "displayed").stdout.strip() or 0) > 0, timeout=15,
             what="the back-in-rotation notification")
    sh("dunstctl", "action", "0")
    log = desktop.tmp / "app.log"
    assert wait_for(lambda: "notification clicked" in log.read_text(), timeout=10, what="the click")
    assert 'screen="providers"' in log.read_text() or "screen=providers" in log.read_text()
    assert wait_for(visible_window, timeout=10, what="the window")
    # Second provider: Enabled is its first item.
    provider_item(tray, 1, ["Return"])
    assert wait_for(lambda: provider(desktop, "codex")["enabled"] is False, timeout=5, what="codex off")
    provider_item(tray, 1, ["Return"])
    assert wait_for(lambda: provider(desktop, "codex")["enabled"] is True, timeout=5, what="codex on")
    provider_item(tray, 1, ["Down", "Return"])  # Use first
    assert wait_for(lambda: order(desktop)[0] == "codex", timeout=5, what="codex first")


def test_the_tray_says_which_tools_baton_connected_and_opens_connect(desktop):
    """After Connect writes Claude Code's settings, the tray names it (and where to undo it);
    the item opens the Connect screen."""
    tray = wait_for(tray_window, timeout=15, what="the tray icon")
    path = "/admin/connect/claude-code"
    status, _, body = desktop.request(path, {"dryRun": True}, admin=True)
    assert status == 200, body
    status, _, body = desktop.request(path, {"fingerprint": json.loads(body)["fingerprint"]}, admin=True)
    assert status == 200, body
    settings = desktop.home / ".claude" / "settings.json"
    assert json.loads(settings.read_text())["env"]["ANTHROPIC_BASE_URL"] == desktop.url
    time.sleep(6)  # the tray looks again every 5 s
    open_menu(tray)
    time.sleep(0.4)
    sh("scrot", "-o", str(ARTIFACTS / "tray-connected.png"))
    sh("xdotool", "key", "Escape")
    pick(desktop, tray, ["Up", "Up", "Up", "Up", "Return"], "connect")  # above Activity, Restart, Quit
    assert wait_for(visible_window, timeout=10, what="the window")
    status, _, body = desktop.request(path + "/undo", {"dryRun": True}, admin=True)
    status, _, body = desktop.request(path + "/undo", {"fingerprint": json.loads(body)["fingerprint"]}, admin=True)
    assert status == 200, body
    assert not settings.exists(), "Baton had created it, so undo removes it"


def test_restart_from_the_tray_keeps_the_address(desktop):
    tray = wait_for(tray_window, timeout=15, what="the tray icon")
    # The request log is one item away (above Restart): the window opens on Activity.
    pick(desktop, tray, ["Up", "Up", "Up", "Return"], "activity")
    assert wait_for(visible_window, timeout=10, what="the window")
    time.sleep(1.5)
    sh("scrot", "-o", str(ARTIFACTS / "tray-activity.png"))
    pick(desktop, tray, ["Up", "Up", "Return"], "restart")  # above the version line and Quit
    log = desktop.tmp / "app.log"
    assert wait_for(lambda: "gateway restarted" in log.read_text(), timeout=30, what="the restart")
    assert "restarting: finishing in-flight requests" in log.read_text()
    status, _, _ = desktop.request("/health")
    assert status == 200, "same address after the restart"
    assert order(desktop)[0] == "codex", "the order set before is kept"
    # A new address set in Settings, applied with Restart now: the gateway and the window move.
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        new_port = s.getsockname()[1]
    status, _, body = desktop.request("/admin/settings", {"listen": {"host": "127.0.0.1", "port": new_port}},
                                      method="PUT", admin=True)
    assert status == 200, body
    status, _, _ = desktop.request("/admin/desktop/restart", {}, method="POST", admin=True)
    assert status == 202
    old_url = desktop.url
    desktop.url = f"http://127.0.0.1:{new_port}"

    def moved():
        try:
            return desktop.request("/health")[0] == 200
        except OSError:
            return False
    assert wait_for(moved, timeout=30, what="the gateway on the new port")
    try:
        urllib.request.urlopen(old_url + "/health", timeout=2)
        raise AssertionError("the old address still answers")
    except OSError:
        pass
    time.sleep(2)
    sh("scrot", "-o", str(ARTIFACTS / "after-address-change.png"))


def test_a_second_launch_starts_no_second_gateway(desktop):
    second = subprocess.run(desktop.args(), env=desktop.env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert "listening on" not in second.stdout
    assert desktop.proc.poll() is None
    assert desktop.chat()[0] == 200
    # It brought the running window forward; let the page render, then keep a picture.
    assert wait_for(visible_window, timeout=10, what="the window")
    time.sleep(3)
    sh("scrot", "-o", str(ARTIFACTS / "window.png"))


def test_a_second_launch_for_another_data_directory_says_what_it_does(desktop):
    """Another setup cannot start beside the running one (one app, one tray): the second launch
    is not silently dropped but said, naming both data directories and what to do instead."""
    other = desktop.tmp / "another-setup"
    clear_notifications()
    args = [DESKTOP, "--config", str(desktop.config), "--data-dir", str(other)]
    second = subprocess.run(args, env=desktop.env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert "listening on" not in second.stdout
    assert desktop.proc.poll() is None
    said = wait_for(lambda: [n for n in notifications() if n["summary"] == "Baton is already running"],
                    timeout=10, what="the already-running notification")
    body = said[0]["body"]
    assert str(desktop.data) in body and str(other) in body and "--data-dir" in body, body
    assert "second launch for another data directory" in (desktop.tmp / "app.log").read_text()
    assert not other.exists(), "nothing was created for the other setup"


def test_quit_from_the_tray_exits_cleanly_with_the_log_flushed(desktop):
    tray = wait_for(tray_window, timeout=15, what="the tray icon")
    pick(desktop, tray, ["Up", "Return"], "quit")  # the last item: Quit Baton
    code = desktop.proc.wait(15)
    assert code == 0
    log = (desktop.tmp / "app.log").read_text()
    assert "quitting: finishing in-flight requests" in log
    assert "gateway stopped" in log
    rows = sqlite3.connect(desktop.data / "baton.db").execute("SELECT count(*) FROM request_log").fetchone()[0]
    # 8 routed requests and the one refused while paused (logged, with its reason).
    assert rows == 9, "every request is in the log after Quit"
    assert tray_window() is None, "the tray icon is gone"


def test_without_a_display_it_runs_the_gateway_only(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["HOME"] = str(tmp_path)
    p = subprocess.Popen([DESKTOP, "--data-dir", str(tmp_path / "data"), "--port", "0"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = wait_for(lambda: p.stdout.readline(), timeout=30, what="listening")
        url = re.search(r"listening on (http://\S+)", line).group(1)
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            assert r.status == 200
    finally:
        p.terminate()
        _, err = p.communicate(timeout=15)
    assert p.returncode == 0, err
    assert "no display found" in err and "running the gateway only" in err


def taken_port():
    """A loopback port something else listens on: (the listening socket, its port)."""
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


def healthy(port):
    """Whether a gateway answers /health on this port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def test_a_taken_port_is_explained(desktop, tmp_path):
    sock, port = taken_port()
    clear_notifications()
    env = {**os.environ, "HOME": str(tmp_path)}
    p = subprocess.Popen([DESKTOP, "--data-dir", str(tmp_path / "data"), "--port", str(port)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        found = wait_for(lambda: [n for n in notifications() if n["summary"] == "Baton could not start"],
                         timeout=30, what="the port notification")
        assert str(port) in found[0]["body"] and "Retry" in found[0]["body"], found
        # It suggests a port next to the one asked for, not a hard-coded 8788.
        assert f"Start on port {port + 1}" in found[0]["body"], found
        # A first start's notification already carries Baton's icon (the data directory did
        # not exist before this launch).
        assert found[0]["icon"] == str(tmp_path / "data" / "baton-icon.png"), found
        assert wait_for(visible_window, timeout=10, what="the explaining window")
        time.sleep(2)
        sh("scrot", "-o", str(ARTIFACTS / "port-busy.png"))
        assert p.poll() is None, "it stays up to explain instead of crashing"
        # The port is free again: Retry in the tray starts the gateway on it.
        sock.close()
        tray = wait_for(tray_window, timeout=15, what="the tray icon")
        open_menu(tray)
        time.sleep(0.3)
        sh("scrot", "-o", str(ARTIFACTS / "tray-retry.png"))
        sh("xdotool", "key", "Up", "Up", "Up", "Return")  # Quit, Start on port N, Retry

        assert wait_for(lambda: healthy(port), timeout=20, what="the gateway after Retry")
        time.sleep(2)
        sh("scrot", "-o", str(ARTIFACTS / "after-retry.png"))
    finally:
        p.terminate()
        p.wait(10)
        sock.close()


def test_a_taken_port_starts_on_the_next_one_from_the_tray_and_keeps_it(desktop, tmp_path):
    sock, port = taken_port()
    clear_notifications()
    env = {**os.environ, "HOME": str(tmp_path)}
    args = [DESKTOP, "--data-dir", str(tmp_path / "data")]
    p = subprocess.Popen(args + ["--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: [n for n in notifications() if n["summary"] == "Baton could not start"],
                 timeout=30, what="the port notification")
        # The port stays taken: "Start on port N+1" in the tray starts there.
        tray = wait_for(tray_window, timeout=15, what="the tray icon")
        open_menu(tray)
        time.sleep(0.3)
        sh("scrot", "-o", str(ARTIFACTS / "tray-other-port.png"))
        sh("xdotool", "key", "Up", "Up", "Return")  # Quit, then Start on port N+1
        assert wait_for(lambda: healthy(port + 1), timeout=20, what=f"the gateway on port {port + 1}")
    finally:
        p.terminate()
        p.wait(15)
    # The next start (as at login: no --port) listens where the tray chose.
    p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: healthy(port + 1), timeout=30, what="the kept port after a restart")
    finally:
        p.terminate()
        p.wait(15)
        sock.close()


def test_a_first_launch_with_nothing_configured_opens_the_window(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    p = subprocess.Popen([DESKTOP, "--data-dir", str(tmp_path / "data"), "--port", "0"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = wait_for(lambda: p.stdout.readline(), timeout=60, what="listening")
        assert "listening on" in line, line
        # Not just a red tray icon: the window opens on the welcome screen.
        assert wait_for(visible_window, timeout=15, what="the welcome window")
        time.sleep(3)
        sh("scrot", "-o", str(ARTIFACTS / "first-launch.png"))
    finally:
        p.terminate()
        p.wait(15)


def test_the_tray_and_notifications_speak_the_system_language(tmp_path):
    """A Japanese desktop (LANG=ja_JP.UTF-8, nothing chosen in Settings): the failover
    notification and its click action are Japanese, with a 24-hour clock; the tray menu is
    Japanese (screenshot). Then Settings chooses Simplified Chinese and the next notification
    follows at once."""
    ARTIFACTS.mkdir(exist_ok=True)
    app = App(tmp_path)
    app.env.update(JAPANESE)
    trayer = None
    if tray_window() is None:
        trayer = start_trayer()
    dunst = None if _notifier_pid() else start_dunst()
    try:
        app.start()
        clear_notifications()
        status, headers, _ = app.chat()
        assert status == 200 and headers.get("x-gateway-provider") == "codex"
        found = wait_for(lambda: [n for n in notifications() if n["app"] == "Baton"], timeout=10, what="a notification")
        assert found[0]["summary"] == "Baton がプロバイダーを切り替えました", found
        assert re.match(r"Claude Code がセッション上限に達しました — (\d{1,2}月\d{1,2}日 )?\d\d:\d\d に復帰。現在は Codex を使用中$",
                        found[0]["body"]), found[0]["body"]
        tray = wait_for(tray_window, timeout=15, what="the tray icon")
        open_menu(tray)
        time.sleep(0.5)
        sh("scrot", "-o", str(ARTIFACTS / "tray-menu-ja.png"))
        sh("xdotool", "key", "Escape")
        # Chosen in Settings: Simplified Chinese, for the next notification at once.
        status, _, body = app.request("/admin/settings", {"language": "zh-CN"}, method="PUT", admin=True)
        assert status == 200, body
        clear_notifications()
        (tmp_path / "codex" / "modes").write_text("limit\n")
        app.request("/admin/cooldowns", method="DELETE", admin=True)
        app.chat()
        found = wait_for(lambda: [n for n in notifications() if n["app"] == "Baton"], timeout=10, what="a notification")
        # Claude capped again and Codex capped now: a switch, or nothing left — said in Chinese.
        assert found[0]["summary"] in ("Baton 已切换提供方", "Baton：没有可用的提供方"), found
        time.sleep(0.5)
        open_menu(tray)
        time.sleep(0.5)
        sh("scrot", "-o", str(ARTIFACTS / "tray-menu-zh-CN.png"))
        sh("xdotool", "key", "Escape")
        # Every text the tray and notifications asked for is in the catalogue (a missing one
        # would show in English whatever the language).
        assert "missing from the catalogue" not in (tmp_path / "app.log").read_text()
    finally:
        if app.proc and app.proc.poll() is None:
            app.proc.terminate()
            app.proc.wait(15)
        app.upstream.terminate()
        if trayer:
            trayer.terminate()
        if dunst:
            stop_dunst(dunst)


def test_a_taken_port_is_explained_in_the_system_language(tmp_path):
    """A Japanese desktop: the port notification and the window that explains it are Japanese
    (the window's page reads the same catalogue from the app's own files; screenshot)."""
    sock, port = taken_port()
    dunst = None if _notifier_pid() else start_dunst()
    clear_notifications()
    env = {**os.environ, "HOME": str(tmp_path), **JAPANESE}
    p = subprocess.Popen([DESKTOP, "--data-dir", str(tmp_path / "data"), "--port", str(port)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        found = wait_for(lambda: [n for n in notifications() if n["summary"] == "Baton を起動できませんでした"],
                         timeout=30, what="the port notification in Japanese")
        assert f"ポート {port + 1} で起動" in found[0]["body"], found
        assert wait_for(visible_window, timeout=10, what="the explaining window")
        time.sleep(2)
        sh("scrot", "-o", str(ARTIFACTS / "port-busy-ja.png"))
    finally:
        p.terminate()
        p.wait(10)
        sock.close()
        if dunst:
            stop_dunst(dunst)


def test_keys_missing_at_start_are_said_not_only_logged(tmp_path):
    """A start that cannot see a provider's key (a login start runs no shell exports) says so in
    a notification naming the variable and the provider, with where to put it."""
    app = App(tmp_path)
    app.config.write_text(json.dumps({"server": {"port": 0}, "providers": [
        {"id": "groq", "kind": "openai-compatible", "baseUrl": app.upstream_url + "/v1", "models": ["llama"],
         "keys": [{"env": "BT_DESKTOP_UNSET_KEY"}]}]}))
    app.env.pop("BT_DESKTOP_UNSET_KEY", None)
    dunst = None if _notifier_pid() else start_dunst()
    try:
        clear_notifications()
        app.start()
        said = wait_for(lambda: [n for n in notifications() if n["summary"] == "Baton started without some keys"],
                        timeout=15, what="the missing-keys notification")
        body = said[0]["body"]
        assert "BT_DESKTOP_UNSET_KEY (groq)" in body and "baton/env" in body, body
    finally:
        if app.proc and app.proc.poll() is None:
            app.proc.terminate()
            app.proc.wait(15)
        app.upstream.terminate()
        if dunst:
            stop_dunst(dunst)
