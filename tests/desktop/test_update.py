"""Updates of the tray app, end to end, against an update server on loopback that the test runs:
nothing is asked before the user turns updates on; a tampered build, one signed with another key
and an older build relabelled as newer are all refused with the reason and nothing replaced; a
good one is installed at the user's request and the app restarts into it with its config, keys
and request log intact.

The "next version" is the built binary with its version marker rewritten (same length), signed
with a key made here by the real `minisign`; debug builds take the trusted key from
BATON_UPDATE_PUBKEY (release builds only from the build)."""

import hashlib
import http.server
import json
import os
import re
import shutil
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

DESKTOP = os.environ.get("BATON_DESKTOP_BIN", "")
FAKE_UPSTREAM = os.environ.get("FAKE_UPSTREAM_BIN", "")
PLATFORM = "linux-x86_64"

pytestmark = pytest.mark.skipif(
    not (DESKTOP and FAKE_UPSTREAM and os.environ.get("DISPLAY")),
    reason="run through tests/desktop/run.sh with BATON_DESKTOP_BIN and FAKE_UPSTREAM_BIN",
)


def run(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, check=True, **kw)


class Server:
    """Serves a folder on loopback and counts the requests."""

    def __init__(self, root: Path):
        self.requests = []
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(root), **kw)

            def do_GET(self):
                outer.requests.append(self.path)
                super().do_GET()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def sign(secret: Path, path: Path, comment: str) -> str:
    run("minisign", "-S", "-s", str(secret), "-m", str(path), "-t", comment)
    return Path(str(path) + ".minisig").read_text()


def next_version(binary: bytes, old: str, new: str) -> bytes:
    a, b = f"\0BATON_VERSION={old}\0".encode(), f"\0BATON_VERSION={new}\0".encode()
    assert len(a) == len(b) and binary.count(a) == 1, "the version marker is in the binary once"
    return binary.replace(a, b)


def call(base, path, body=None, method=None, admin=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json", "x-admin-key": admin or ""})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_updates_are_off_until_asked_verified_then_installed_with_a_restart(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    run("minisign", "-G", "-W", "-p", str(keys / "k.pub"), "-s", str(keys / "k.sec"))
    run("minisign", "-G", "-W", "-p", str(keys / "other.pub"), "-s", str(keys / "other.sec"))
    pub = (keys / "k.pub").read_text().splitlines()[-1]

    # The installed app: a copy in a folder the user owns (as a tarball install would be).
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    app = app_dir / "baton-desktop"
    shutil.copy(DESKTOP, app)
    current = run(str(app), "--version").stdout.split()[-1]
    major, minor, patch = map(int, current.split("."))
    newer = f"{major}.{minor}.{patch + 1}" if patch < 9 else f"{major}.{minor + 1}.0"
    newer = newer if len(newer) == len(current) else pytest.skip("version lengths differ")
    original = app.read_bytes()

    srv_root = tmp_path / "srv"
    srv_root.mkdir()
    good = srv_root / f"baton-desktop-{newer}"
    good.write_bytes(next_version(original, current, newer))
    good_sig = sign(keys / "k.sec", good, f"baton-desktop {newer} {PLATFORM}")
    tampered = srv_root / "tampered"
    data = bytearray(good.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tampered.write_bytes(bytes(data))
    other = srv_root / "other-key"
    other.write_bytes(good.read_bytes())
    other_sig = sign(keys / "other.sec", other, f"baton-desktop {newer} {PLATFORM}")
    old = srv_root / "old-relabelled"
    old.write_bytes(original)
    old_sig = sign(keys / "k.sec", old, f"baton-desktop {current} {PLATFORM}")
    server = Server(srv_root)

    def manifest(name, artifact, sig):
        (srv_root / name).write_text(json.dumps({
            "version": newer, "notes": "Faster failover.\nA second line of notes.", "pub_date": "2026-12-24T00:00:00Z",
            "platforms": {PLATFORM: {"url": f"{server.url}/{artifact.name}", "signature": sig}}}))
        return f"{server.url}/{name}"

    config = tmp_path / "config.json"
    upstream = subprocess.Popen([FAKE_UPSTREAM, "--name", "groq", "--mode", "ok"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    up_url = re.search(r"listening on (http://\S+)", upstream.stdout.readline()).group(1)
    config.write_text(json.dumps({"server": {"port": 0}, "providers": [
        {"id": "groq", "kind": "openai-compatible", "baseUrl": up_url + "/v1", "models": ["llama"],
         "keys": [{"env": "BT_UPDATE_GROQ_KEY"}]}]}))
    data_dir = tmp_path / "data"
    env = {**os.environ, "HOME": str(tmp_path / "home"), "BATON_UPDATE_PUBKEY": pub,
           "BT_UPDATE_GROQ_KEY": "gsk-update-test"}
    (tmp_path / "home").mkdir()
    log = open(tmp_path / "app.log", "w")
    proc = subprocess.Popen([str(app), "--config", str(config), "--data-dir", str(data_dir)], env=env,
                            stdout=subprocess.PIPE, stderr=log, text=True)
    new_pid = None
    try:
        base = re.search(r"listening on (http://\S+)", proc.stdout.readline()).group(1)
        admin = (data_dir / "admin.key").read_text().strip()
        gateway_key = (data_dir / "gateway.key").read_text().strip()

        def chat(base):
            req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(
                {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}).encode(),
                headers={"authorization": f"Bearer {gateway_key}", "content-type": "application/json"})
            return urllib.request.urlopen(req, timeout=30).status

        assert chat(base) == 200

        # Off by default: a check is refused and the update server hears nothing.
        status, v = call(base, "/admin/update", admin=admin)
        assert status == 200 and v["enabled"] is False and v["supported"] and v["signed"], v
        status, v = call(base, "/admin/update", {"url": manifest("latest.json", good, good_sig)}, "PUT", admin)
        assert status == 200, v
        status, v = call(base, "/admin/update/check", {}, "POST", admin)
        assert status == 409 and v["error"]["code"] == "updates_off", v
        status, v = call(base, "/admin/update", {"url": "http://example.com/latest.json"}, "PUT", admin)
        assert status == 422 and "https" in v["error"]["message"], v
        assert server.requests == [], "nothing is asked before updates are turned on"

        # Refused: changed bytes, another key, an older build signed as what it is.
        status, v = call(base, "/admin/update", {"enabled": True}, "PUT", admin)
        assert status == 200 and v["enabled"], v
        for name, artifact, sig, why in [
            ("tampered.json", tampered, good_sig, "does not match"),
            ("other.json", other, other_sig, "does not match"),
            ("old.json", old, old_sig, f"signed as \"baton-desktop {current} {PLATFORM}\""),
            ("unsigned.json", good, "", "not signed"),
        ]:
            call(base, "/admin/update", {"url": manifest(name, artifact, sig)}, "PUT", admin)
            status, v = call(base, "/admin/update/check", {}, "POST", admin)
            if status != 200:
                assert status == 502 and why in v["error"]["message"], (name, v)
                continue
            assert v["offer"]["version"] == newer, v
            status, v = call(base, "/admin/update/install", {}, "POST", admin)
            assert status == 502 and v["error"]["code"] == "update_rejected", (name, v)
            assert why in v["error"]["message"] and "Nothing was installed" in v["error"]["message"], (name, v)
            assert app.read_bytes() == original, f"{name}: the installed binary is untouched"
        assert proc.poll() is None

        # The real one: offered with its notes, installed on request, restarted into.
        call(base, "/admin/update", {"url": manifest("latest.json", good, good_sig)}, "PUT", admin)
        status, v = call(base, "/admin/update/check", {}, "POST", admin)
        assert status == 200 and v["offer"]["version"] == newer and v["offer"]["notes"].startswith("Faster failover"), v
        assert v["current"] == current
        status, v = call(base, "/admin/update/install", {}, "POST", admin)
        assert status == 202 and v == {"installed": newer, "restarting": True}, v
        assert hashlib.sha256(app.read_bytes()).digest() == hashlib.sha256(good.read_bytes()).digest()
        assert proc.wait(30) == 0, "the old version quits cleanly"
        line = proc.stdout.readline()  # the new process inherited the same stdout
        base = re.search(r"listening on (http://\S+)", line).group(1)
        health = json.loads(urllib.request.urlopen(base + "/health", timeout=10).read())
        assert health["version"] == newer, health
        new_pid = int(run("pgrep", "-f", str(app)).stdout.split()[0])
        # Config, keys and the request log are as they were.
        assert (data_dir / "gateway.key").read_text().strip() == gateway_key
        status, v = call(base, "/admin/providers", admin=(data_dir / "admin.key").read_text().strip())
        assert [p["id"] for p in v["providers"]] == ["groq"], v
        rows = sqlite3.connect(data_dir / "baton.db").execute("SELECT count(*) FROM request_log").fetchone()[0]
        assert rows == 1
        assert chat(base) == 200
    finally:
        if proc.poll() is None:
            proc.terminate()
        if new_pid:
            subprocess.run(["kill", "-TERM", str(new_pid)])
            for _ in range(100):
                if not Path(f"/proc/{new_pid}").exists():
                    break
                time.sleep(0.1)
        upstream.terminate()
        server.httpd.shutdown()
