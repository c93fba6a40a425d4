"""One step of the install test, run as the fresh user in their own D-Bus session
(`runuser -u USER -- dbus-run-session -- python3 user_step.py STEP`): starts the installed tray
app the way the desktop would (from /usr/bin, or from the autostart entry), with a tray host and
a notification daemon of its own, checks it, and prints what it found as one JSON line.

Steps: `first` (a first start: window, tray, gateway on 8787, a provider with a typed key, one
request, start at login turned on), `again` (a later start, from the autostart entry's own Exec
line: the same data, key, provider and request log)."""
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HOME = Path(os.environ["HOME"])
DATA = HOME / ".local/share/baton"
AUTOSTART = HOME / ".config/autostart/Baton.desktop"
SHOTS = Path(os.environ["SHOTS"])
BASE = "http://127.0.0.1:8787"


def wait_for(pred, timeout=20.0, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def sh(*args):
    return subprocess.run(args, capture_output=True, text=True)


def request(path, body=None, key=None, admin=False, method=None):
    headers = {"content-type": "application/json"}
    if admin:
        headers["x-admin-key"] = (DATA / "admin.key").read_text().strip()
    elif key:
        headers["authorization"] = f"Bearer {key}"
    req = urllib.request.Request(BASE + path, data=None if body is None else json.dumps(body).encode(),
                                 headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def visible_window():
    for w in sh("xdotool", "search", "--onlyvisible", "--name", "^Baton$").stdout.split():
        if "480x" in sh("xdotool", "getwindowgeometry", w).stdout:
            return w
    return None


def tray_icon():
    """The tray icon's window, once it has an image (an icon the tray host could not read
    stays a sliver a pixel or two wide)."""
    for w in sh("xdotool", "search", "--class", "tray-icon tray app").stdout.split():
        m = re.search(r"Geometry: (\d+)x(\d+)", sh("xdotool", "getwindowgeometry", w).stdout)
        if m and int(m.group(1)) >= 16 and int(m.group(2)) >= 16:
            return w
    return None


def start(argv):
    log = open(SHOTS / f"app-{STEP}.log", "w")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    line = wait_for(lambda: proc.stdout.readline(), timeout=60, what="the app to listen")
    assert "listening on http://127.0.0.1:8787" in line, line
    return proc


def quit(proc):
    proc.terminate()
    code = proc.wait(20)
    assert code == 0, f"the app exited with {code} on SIGTERM (its log: app-{STEP}.log)"


STEP = sys.argv[1]
found = {"step": STEP}
daemons = [subprocess.Popen(["dunst"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
           subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--widthtype", "request",
                             "--height", "32", "--SetDockType", "true"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
try:
    if STEP == "first":
        assert not DATA.exists(), "a fresh user has no Baton data"
        proc = start(["/usr/bin/baton-desktop"])
        found["window"] = bool(wait_for(visible_window, what="the first window"))
        found["tray"] = bool(wait_for(tray_icon, what="the tray icon"))
        time.sleep(3)
        sh("scrot", "-o", str(SHOTS / "installed-first-start.png"))
        found["health"] = request("/health")[0]
        # A provider with a key typed into Baton (it goes to the credential store, here the
        # 0600 file: this session has no Secret Service), then one request through it.
        upstream = subprocess.Popen([os.environ["FAKE_UPSTREAM"], "--name", "homelab", "--mode", "ok"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        url = re.search(r"listening on (http://\S+)", upstream.stdout.readline()).group(1)
        status, v = request("/admin/providers", {
            "id": "homelab", "kind": "openai-compatible", "baseUrl": url + "/v1", "models": ["m"],
            "keys": [], "newKeys": ["sk-install-test-typed-key-0001"]}, admin=True)
        assert status == 201, v
        key = (DATA / "gateway.key").read_text().strip()
        status, v = request("/v1/chat/completions", {"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
                            key=key)
        assert status == 200, v
        upstream.terminate()
        status, v = request("/admin/desktop", {"autostart": True}, admin=True, method="PUT")
        assert status == 200 and v["autostart"] is True, v
        quit(proc)
    elif STEP == "again":
        # A login start runs the autostart entry's Exec line: run exactly that.
        entry = AUTOSTART.read_text()
        exec_line = re.search(r"^Exec=(.*)$", entry, re.M).group(1)
        found["autostart_exec"] = exec_line
        proc = start(shlex.split(exec_line))
        found["tray"] = bool(wait_for(tray_icon, what="the tray icon"))
        found["health"] = request("/health")[0]
        status, v = request("/admin/providers", admin=True)
        found["providers"] = [p["id"] for p in v["providers"]]
        found["stored_key"] = any("stored" in k for p in v["providers"] for k in p["config"].get("keys", []))
        key = (DATA / "gateway.key").read_text().strip()
        status, v = request("/v1/models", key=key)
        found["gateway_key_works"] = status == 200
        quit(proc)
    else:
        raise SystemExit(f"unknown step {STEP}")
    found["data_files"] = sorted(p.name for p in DATA.iterdir())
    found["autostart"] = AUTOSTART.read_text() if AUTOSTART.exists() else None
    print(json.dumps(found))
finally:
    for d in daemons:
        d.terminate()
