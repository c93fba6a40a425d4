"""Fixtures that run the real `baton serve` binary in front of real fake upstreams."""
import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
BATON = os.environ.get("BATON_BIN", str(TARGET / "debug" / "baton"))
FAKE = os.environ.get("FAKE_UPSTREAM_BIN", str(TARGET / "debug" / "fake-upstream"))


def _spawn(args, env=None):
    """Starts a process that prints `listening on http://ADDR`; returns (proc, url)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"{args[0]} did not start: {line!r} {proc.stderr.read()}")
    return proc, line.split()[-1].strip()


class Fake:
    def __init__(self, name, *extra):
        self.proc, self.url = _spawn([FAKE, "--name", name, "--mode", "auto", *extra])

    def script(self, *modes):
        req = urllib.request.Request(self.url + "/_script", data=json.dumps(list(modes)).encode(),
                                     headers={"content-type": "application/json"}, method="POST")
        urllib.request.urlopen(req).read()

    def stats(self, all=False):
        """How many requests, the last body; with `all`, every body received."""
        query = "?all=1" if all else ""
        return json.loads(urllib.request.urlopen(self.url + "/_stats" + query).read())

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Baton:
    def __init__(self, tmp, providers, model_map=None, **config):
        self.data = tmp / "data"
        cfg = {"providers": providers, "modelMap": model_map or {"claude-*": "auto"}, **config}
        self.config = tmp / "config.json"
        self.config.write_text(json.dumps(cfg))
        env = dict(os.environ, BATON_LOG="info")
        self.proc, self.url = _spawn([BATON, "serve", "--config", str(self.config), "--data-dir",
                                      str(self.data), "--port", "0"], env=env)
        self.key = (self.data / "gateway.key").read_text().strip()
        self.base_url = self.url + "/v1"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        return self.proc.returncode


def baton_connect(gw, home, client, *extra, env=None):
    """`baton connect CLIENT --yes` as the user whose home is `home`: the client's own config
    file is written, as the Connect screen's button does; returns what it printed."""
    run_env = dict(env or {}, PATH=os.environ["PATH"], HOME=str(home))
    out = subprocess.run([BATON, "connect", client, "--yes", "--url", gw.url, "--data-dir",
                          str(gw.data), *extra], env=run_env, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


class EventTap:
    """Collects the gateway's events (`GET /admin/events`) in the background."""

    def __init__(self, baton):
        import threading
        self.events = []
        req = urllib.request.Request(baton.url + "/admin/events", headers={
            "x-admin-key": (baton.data / "admin.key").read_text().strip()})
        self.resp = urllib.request.urlopen(req)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for raw in self.resp:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    self.events.append(json.loads(line[5:]))
        except Exception:
            pass

    def of(self, kind):
        return [e for e in self.events if e.get("type") == kind]


def admin(gw, method, path, body=None):
    """The admin API of the gateway `gw` (anything with `url` and `data`), as JSON."""
    key = (gw.data / "admin.key").read_text().strip()
    req = urllib.request.Request(gw.url + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"x-admin-key": key, "content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")


def admin_state(baton):
    req = urllib.request.Request(baton.url + "/admin/state", headers={
        "x-admin-key": (baton.data / "admin.key").read_text().strip()})
    return urllib.request.urlopen(req).read().decode()


# Every upstream kind and the path its API's base URL ends in.
KINDS = {
    "openai-responses": "/v1",
    "openai-compatible": "/v1",
    "anthropic": "/v1",
    "gemini": "/v1beta",
}


def tool_outputs(kind, body):
    """The tool results an upstream of `kind` got in a request `body`, as text, in order."""
    if kind == "openai-responses":
        return [json.dumps(i.get("output")) for i in body.get("input", [])
                if i.get("type") in ("custom_tool_call_output", "function_call_output")]
    if kind == "openai-compatible":
        return [json.dumps(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]
    if kind == "anthropic":
        return [json.dumps(b.get("content")) for m in body["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_result"]
    body = body.get("body", body)  # the Gemini fake keeps the path beside the body
    return [json.dumps(p["functionResponse"]) for c in body["contents"] for p in c.get("parts", [])
            if "functionResponse" in p]


def provider(pid, fake, priority):
    return {"id": pid, "kind": "openai-compatible", "baseUrl": fake.url + "/v1",
            "models": [f"{pid}-model"], "priority": priority,
            "timeouts": {"connectMs": 2000, "firstByteMs": 5000, "idleMs": 5000}}


@pytest.fixture
def gateway(tmp_path):
    a, b = Fake("a"), Fake("b")
    baton = Baton(tmp_path, [provider("a", a, 10), provider("b", b, 20)])
    baton.a, baton.b = a, b
    yield baton
    if baton.proc.poll() is None:
        baton.stop()
    a.stop()
    b.stop()


@pytest.fixture
def anthropic_gateway(tmp_path):
    """Baton in front of a fake Anthropic Messages upstream (kind `anthropic`)."""
    up = Fake("a")
    baton = Baton(tmp_path, [{"id": "claude", "kind": "anthropic", "baseUrl": up.url + "/v1",
                              "models": ["claude-real-model"]}])
    baton.a = up
    yield baton
    if baton.proc.poll() is None:
        baton.stop()
    up.stop()
