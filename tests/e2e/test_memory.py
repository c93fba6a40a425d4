"""One client cannot exhaust memory: a body of many small values is refused before it is parsed,
and requests in flight together stay within server.memoryBudgetBytes (the rest get a 503 with
Retry-After). Peak RSS is read from /proc for the real `baton serve` process."""
import json
import os
import threading
import urllib.error
import urllib.request

from conftest import BATON, Fake, _spawn


def peak_rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def post(url, key, body):
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, method="POST",
                                 headers={"authorization": f"Bearer {key}",
                                          "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def test_hostile_bodies_stay_within_the_memory_budget(tmp_path):
    fake = Fake("up")
    budget = 400 * 1024 * 1024
    # Translated for another API (Chat Completions to Anthropic): the client's body, the
    # canonical request and the upstream's body are held at once, the costliest path.
    cfg = {"providers": [{"id": "up", "kind": "anthropic", "baseUrl": fake.url + "/v1",
                          "models": ["up-model"], "keys": [{"env": "BATON_TEST_UP_KEY"}]}],
           "server": {"memoryBudgetBytes": budget}}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    env = dict(os.environ, BATON_TEST_UP_KEY="sk-ant-test-memory-key-000000")
    proc, url = _spawn([BATON, "serve", "--config", str(tmp_path / "c.json"), "--data-dir",
                        str(tmp_path / "data"), "--port", "0"], env=env)
    try:
        key = (tmp_path / "data" / "gateway.key").read_text().strip()
        status, _, _ = post(url, key, json.dumps(
            {"model": "auto", "messages": [{"role": "user", "content": "warm"}]}).encode())
        assert status == 200
        base = rss(proc.pid)

        # 15 MB of tiny content parts: refused before parsing (it once took 35x its size).
        part = {"type": "text", "text": "x"}
        many = json.dumps({"model": "auto", "messages": [
            {"role": "user", "content": [part] * 600_000}]}).encode()
        status, _, err = post(url, key, many)
        assert status == 413, err
        assert "maxJsonValues" in err["error"]["message"], err
        assert peak_rss(proc.pid) - base < 3 * len(many), "not parsed"

        # Eight of the largest bodies the value limit admits, at once: each is charged about
        # 340 MB (what the worst translation was measured to hold), so the 400 MiB budget
        # holds one at a time and the rest are told to come back.
        at_limit = json.dumps({"model": "auto", "messages": [
            {"role": "user", "content": [part] * 95_000}]}).encode()
        results = []
        threads = [threading.Thread(target=lambda: results.append(post(url, key, at_limit)))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        busy = [r for r in results if r[0] == 503]
        assert busy, [r[0] for r in results]
        for status, headers, err in busy:
            assert err["error"]["code"] == "memory_budget", err
            assert headers.get("retry-after") == "1", headers
        # Whatever was served, never more than the budget was held at once.
        assert peak_rss(proc.pid) - base < budget + 64 * 1024 * 1024, \
            f"peak growth {(peak_rss(proc.pid) - base) / 1e6:.0f} MB"

        # Still serving.
        status, _, _ = post(url, key, json.dumps(
            {"model": "auto", "messages": [{"role": "user", "content": "after"}]}).encode())
        assert status == 200
    finally:
        proc.terminate()
        proc.wait()
        fake.stop()
