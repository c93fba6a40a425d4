"""A hostile client on Codex's Responses WebSocket (`GET /v1/responses` upgraded) against the real
`baton serve`: the audit's attacks, each with raw frames so nothing in a client library softens
them. Under each one Baton's resident memory stays within server.memoryBudgetBytes plus a stated
constant, and /health keeps answering in under 100 ms; and every admission rule of the HTTP path
(the concurrency bound, the connection table, the model allow-list, the key's revocation) holds on
the WebSocket too."""
import base64
import json
import os
import resource
import socket
import struct
import threading
import time
import urllib.request

import pytest

from conftest import BATON, Fake, admin

MiB = 1024 * 1024
BUDGET = 48 * MiB
# What Baton may hold beyond the budget under attack: buffers of the connections themselves
# (a read chunk and a bounded write buffer each), the allocator's slack, the log.
SLACK = 64 * MiB


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def report(what, **figures):
    """The figures an attack left (read with `pytest -s`, e.g. for a release build)."""
    print(f"\n[{what}] " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def health_ms(url):
    t = time.monotonic()
    with urllib.request.urlopen(url + "/health", timeout=5) as r:
        r.read()
    return (time.monotonic() - t) * 1000


class Gateway:
    def __init__(self, tmp, server=None, mode="auto", limits=None, extra=None, env=None):
        self.fake = Fake("up")
        if mode != "auto":
            self.fake.script(*[mode] * 20)
        cfg = {"providers": [{"id": "up", "kind": "openai-compatible", "baseUrl": self.fake.url + "/v1",
                              "models": ["gpt-a", "gpt-b"], "keys": [{"env": "BATON_TEST_UP_KEY"}]}],
               "server": {"memoryBudgetBytes": BUDGET, "bodyTimeoutMs": 2000, **(server or {})},
               **(extra or {})}
        (tmp / "c.json").write_text(json.dumps(cfg))
        self.data = tmp / "data"
        env = dict(os.environ, BATON_TEST_UP_KEY="sk-test-ws-attack-0000000000", **(env or {}))
        if os.environ.get("WS_TEST_LOG"):
            env["BATON_LOG"] = "info,baton::api::websocket=debug"

        def limit():
            if limits:
                resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        self.proc, self.url = _spawn_limited([BATON, "serve", "--config", str(tmp / "c.json"),
                                              "--data-dir", str(self.data), "--port", "0"],
                                             env, limit)
        key_file = self.data / "gateway.key"
        self.key = key_file.read_text().strip() if key_file.exists() else None
        self.host, self.port = self.url.removeprefix("http://").rsplit(":", 1)

    def admin(self, method, path, body=None):
        return admin(self, method, path, body)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.fake.stop()


def _spawn_limited(args, env, preexec):
    import subprocess
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=preexec)
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line + proc.stderr.read()
    # Its log is not read (but kept when WS_TEST_LOG names a file): keep the pipe from filling.
    def drain():
        log = os.environ.get("WS_TEST_LOG")
        out = open(log, "a") if log else None
        for line in proc.stderr:
            if out:
                out.write(line)
                out.flush()
    threading.Thread(target=drain, daemon=True).start()
    return proc, line.split()[-1].strip()


@pytest.fixture
def gw(tmp_path, request):
    g = Gateway(tmp_path, **getattr(request, "param", {}))
    yield g
    g.stop()


def frame(opcode, payload, fin=True):
    """A masked client frame (the mask is zero: the payload goes as it is)."""
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return head + b"\0\0\0\0" + payload


class Raw:
    """A WebSocket client made of a socket: it sends what it likes and reads only when told."""

    def __init__(self, g, key=None, rcvbuf=None):
        self.s = socket.create_connection((g.host, int(g.port)), timeout=10)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        nonce = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f"GET /v1/responses HTTP/1.1\r\nHost: {g.host}:{g.port}\r\n"
                        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\n"
                        f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {key or g.key}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.s.recv(4096)
            assert chunk, head
            head += chunk
        self.status = int(head.split(b" ")[1])
        self.buf = bytearray(head.split(b"\r\n\r\n", 1)[1])

    def send(self, obj):
        self.s.sendall(frame(1, json.dumps(obj).encode()))

    def _read(self, n):
        # A bytearray gives up its front cheaply: reading thousands of small frames (a socket
        # full of pongs) stays linear.
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def message(self):
        """The next data or close frame: (opcode, payload); pongs are skipped."""
        data, first = b"", None
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0F
            if op in (9, 10):
                continue
            if op == 8:
                return 8, payload
            first = first if first is not None else op
            data += payload
            if b0 & 0x80:
                return first, data

    def event(self):
        op, payload = self.message()
        if op == 8:
            code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
            return {"type": "close", "code": code, "reason": payload[2:].decode(errors="replace")}
        return json.loads(payload)

    def closed_within(self, seconds):
        """Whether the server closes the connection (a close frame or EOF) within `seconds`."""
        self.s.settimeout(seconds)
        try:
            while True:
                if self.event()["type"] == "close":
                    return True
        except (EOFError, ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def turn(model="gpt-a", **extra):
    return {"type": "response.create", "model": model, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        **extra}


def test_a_client_that_pings_and_never_reads_is_cut_off_with_memory_bounded(gw):
    base = rss(gw.proc.pid)
    ws = Raw(gw)
    assert ws.status == 101
    pings = frame(9, b"p" * 125) * 8000  # 1 MiB of pings
    sent, peak, slowest = 0, 0, 0.0
    stop = threading.Event()

    def flood():
        # Keeps pushing, frame boundaries intact, whatever the server's pace, until the server
        # cuts the connection (or the test has seen enough).
        nonlocal sent
        ws.s.settimeout(1)
        view, at = memoryview(pings), 0
        while sent < 600 * MiB and not stop.is_set():
            try:
                n = ws.s.send(view[at:])
            except socket.timeout:
                continue
            except OSError:
                return  # cut off
            sent, at = sent + n, (at + n) % len(pings)
    t = threading.Thread(target=flood)
    t.start()
    deadline = time.monotonic() + 20
    while t.is_alive() and time.monotonic() < deadline:
        peak = max(peak, rss(gw.proc.pid) - base)
        slowest = max(slowest, health_ms(gw.url))
        time.sleep(0.2)
    stop.set()
    t.join()
    report("pings, never read", sent_mib=sent // MiB, rss_peak_mib=peak // MiB,
           health_max_ms=round(slowest, 1))
    assert peak < BUDGET + SLACK, f"RSS grew {peak / MiB:.0f} MiB after {sent / MiB:.0f} MiB of pings"
    assert slowest < 100, f"/health took {slowest:.0f} ms"
    assert ws.closed_within(5), "a client that does not read is disconnected"


def test_a_huge_message_is_refused_before_it_is_parsed(gw):
    base = rss(gw.proc.pid)
    # 12 MB of tiny values: over server.maxJsonValues, refused unparsed.
    bomb = json.dumps(turn(input=[{"type": "message", "role": "user", "content": "x"}] * 220_000))
    ws = Raw(gw)
    ws.s.sendall(frame(1, bomb.encode()))
    ev = ws.event()
    assert ev["type"] == "error" and ev["status"] == 413, ev
    assert "maxJsonValues" in ev["error"]["message"]
    assert rss(gw.proc.pid) - base < BUDGET + SLACK
    # The connection goes on: a normal turn is served.
    ws.send(turn())
    while (ev := ws.event())["type"] not in ("response.completed", "error"):
        pass
    assert ev["type"] == "response.completed", ev

    # Four 19 MB messages at once on four connections: the budget holds what it can, the rest
    # are turned away (a 503 event, or the connection closed with 1013 "try again later").
    big = frame(1, json.dumps(turn(instructions="y" * (19 * MiB))).encode())
    socks = [Raw(gw) for _ in range(4)]
    threads = [threading.Thread(target=lambda s=s: _try(s.s.sendall, big)) for s in socks]
    peak = 0
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss(gw.proc.pid) - base)
        time.sleep(0.05)
    outcomes = [_outcome(s) for s in socks]
    report("four 19 MiB messages", rss_peak_mib=peak // MiB, outcomes=outcomes)
    assert peak < BUDGET + SLACK, f"RSS grew {peak / MiB:.0f} MiB"
    assert any(o in ("503", "1013", "413", "closed") for o in outcomes), outcomes
    assert health_ms(gw.url) < 100


def _try(f, *a):
    try:
        f(*a)
    except OSError:
        pass


def _outcome(ws):
    ws.s.settimeout(30)
    try:
        ev = ws.event()
    except (EOFError, OSError):
        return "closed"
    if ev["type"] == "close":
        return str(ev["code"])
    if ev["type"] == "error":
        return str(ev["status"])
    return ev["type"]


@pytest.mark.parametrize("gw", [{"server": {"maxBodyBytes": 4 * MiB}}], indirect=True)
def test_a_chain_of_prewarms_is_bounded_by_the_body_limit(gw):
    base = rss(gw.proc.pid)
    ws = Raw(gw)
    prev, refused = None, None
    chunk = [{"type": "message", "role": "user", "content": "z" * (512 * 1024)}]
    for i in range(40):
        msg = turn(generate=False, input=chunk)
        if prev:
            msg["previous_response_id"] = prev
        ws.send(msg)
        ev = ws.event()
        if ev["type"] == "error":
            refused = ev
            break
        assert ev["type"] == "response.created", ev
        assert ws.event()["type"] == "response.completed"
        prev = ev["response"]["id"]
    report("prewarm chain", refused_after=i, rss_mib=(rss(gw.proc.pid) - base) // MiB)
    assert refused and refused["status"] == 413, refused
    assert "maxBodyBytes" in refused["error"]["message"]
    assert i <= 8, "the conversation kept on the connection cannot outgrow the body limit"
    assert rss(gw.proc.pid) - base < BUDGET + SLACK


def test_messages_that_never_end_are_dropped_like_stalled_bodies(gw):
    socks = []
    for _ in range(40):
        ws = Raw(gw)
        # A frame declaring 1 MiB, of which 64 KiB arrive; then nothing.
        head = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", MiB) + b"\0\0\0\0"
        ws.s.sendall(head + b"a" * 65536)
        socks.append(ws)
    # server.bodyTimeoutMs is 2 s here.
    assert all(ws.closed_within(6) for ws in socks)
    assert health_ms(gw.url) < 100


@pytest.mark.parametrize("gw", [{"server": {"maxConnections": 40}}], indirect=True)
def test_websockets_hold_their_place_in_the_connection_table(gw):
    socks = [Raw(gw) for _ in range(60)]
    assert all(s.status == 101 for s in socks)
    # Each new connection over the cap took the place of the oldest idle one.
    assert sum(s.closed_within(0.5) for s in socks[:20]) == 20
    assert not any(s.closed_within(0.2) for s in socks[-20:])
    assert health_ms(gw.url) < 100


@pytest.mark.parametrize("gw", [{"limits": (256, 256)}], indirect=True)
def test_idle_websockets_cannot_starve_health_under_a_small_descriptor_limit(gw):
    socks = []
    for _ in range(400):
        try:
            socks.append(Raw(gw))
        except OSError:
            break
    slowest = max(health_ms(gw.url) for _ in range(5))
    report("idle sockets under 256 descriptors", opened=len(socks), health_max_ms=round(slowest, 1))
    assert slowest < 100, f"/health took {slowest:.0f} ms with {len(socks)} WebSockets open"


@pytest.mark.parametrize("gw", [{"server": {"maxConcurrentRequests": 2}, "mode": "hang"}],
                         indirect=True)
def test_concurrent_turns_are_bounded_as_http_requests_are(gw):
    socks = [Raw(gw) for _ in range(6)]
    for s in socks:
        s.send(turn())
    busy = []
    for s in socks:
        s.s.settimeout(3)
        try:
            ev = s.event()
        except socket.timeout:
            continue  # one of the two turns holding a slot (its upstream hangs)
        assert ev["type"] == "error", ev
        busy.append(ev)
    assert len(busy) == 4, busy
    assert all(e["status"] == 503 and e["error"]["code"] == "gateway_busy" for e in busy)
    assert all(e["headers"]["retry-after"] == "1" for e in busy)


def test_a_keys_model_allow_list_and_revocation_hold_on_the_websocket(gw):
    made = gw.admin("POST", "/admin/keys", {"label": "only-a", "allow": ["up/gpt-a"]})
    ws = Raw(gw, key=made["key"])
    ws.send(turn(model="up/gpt-b"))
    ev = ws.event()
    assert ev["type"] == "error" and ev["status"] == 403, ev
    assert ev["error"]["code"] == "model_not_allowed"
    ws.send(turn(model="up/gpt-b", generate=False))
    assert ws.event()["status"] == 403, "a prewarm names a model too"
    ws.send(turn(model="up/gpt-a", generate=False))
    assert ws.event()["type"] == "response.created"
    assert ws.event()["type"] == "response.completed"

    # Disabled while the socket is open: told with the API's error, then closed.
    gw.admin("PATCH", f"/admin/keys/{made['id']}", {"disabled": True})
    ws.s.settimeout(5)
    ev = ws.event()
    assert ev["type"] == "error" and ev["status"] == 403, ev
    assert ws.event()["type"] == "close"
    # Deleted: the same.
    other = gw.admin("POST", "/admin/keys", {"label": "gone"})
    ws2 = Raw(gw, key=other["key"])
    gw.admin("DELETE", f"/admin/keys/{other['id']}")
    ws2.s.settimeout(5)
    ev = ws2.event()
    assert ev["type"] == "error" and ev["status"] == 401, ev
    assert Raw(gw, key=other["key"]).status == 401


def _outside_address():
    """An address of this machine other than loopback, if it has one."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        ip = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if ip.startswith("127.") else ip


def test_a_peers_websockets_hold_its_share_at_most(tmp_path):
    ip = _outside_address()
    if not ip:
        pytest.skip("this machine has no address other than loopback")
    team = "bt-team-key-for-the-peer-share-test-0000"
    g = Gateway(tmp_path, mode="hang",
                server={"host": "0.0.0.0", "allowedHosts": [ip], "maxConnectionsPerPeer": 3},
                extra={"gatewayKeys": [{"env": "BATON_TEST_TEAM_KEY", "label": "team"}]},
                env={"BATON_TEST_TEAM_KEY": team})
    try:
        g.host = ip
        socks = [Raw(g, key=team) for _ in range(3)]
        assert all(s.status == 101 for s in socks)
        # Idle, the peer's oldest makes room for its next, as an idle keep-alive would.
        fourth = Raw(g, key=team)
        assert fourth.status == 101
        assert socks[0].closed_within(2)
        # Serving turns, its share is full: a further connection is closed at once.
        busy = socks[1:] + [fourth]
        for s in busy:
            s.send(turn())
        time.sleep(0.5)
        try:
            refused = Raw(g, key=team).status != 101
        except (EOFError, OSError, AssertionError):
            refused = True
        assert refused, "a peer holding its share with turns in flight gets no more"
        assert not any(s.closed_within(0.2) for s in busy), "its serving sockets stay"
        g.host = "127.0.0.1"
        assert Raw(g, key=team).status == 101, "loopback is not that peer"
    finally:
        g.stop()
