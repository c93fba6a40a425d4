"""Hedging with the official SDKs streaming through the real `baton serve`: the first provider
answers its first token only after 5 s, the second at once; with `routing.hedge` on, the
stream the SDK reads is the second provider's, whole, and the slow attempt is cancelled and
logged beside it (`outrun`). With hedging off (the default) the same request waits for the
first provider."""
import json
import time
import urllib.request

import anthropic
import openai
import pytest

from conftest import Baton, Fake

SLOW = "delay:5000"


def providers(slow, fast):
    return [
        {"id": "slow", "kind": "openai-compatible", "baseUrl": slow.url + "/v1",
         "models": ["m"], "priority": 1, "timeouts": {"firstByteMs": 20000}},
        {"id": "fast", "kind": "openai-compatible", "baseUrl": fast.url + "/v1",
         "models": ["m"], "priority": 2}]


@pytest.fixture
def fakes():
    slow, fast = Fake("slow"), Fake("fast")
    slow.script(SLOW)
    yield slow, fast
    slow.stop()
    fast.stop()


def hedged(tmp_path, slow, fast):
    return Baton(tmp_path, providers(slow, fast),
                 routing={"hedge": {"enabled": True, "after": 300, "budgetPercent": 100}})


def attempts(gw, request_id):
    req = urllib.request.Request(gw.url + "/admin/log", headers={
        "x-admin-key": (gw.data / "admin.key").read_text().strip()})
    rows = json.loads(urllib.request.urlopen(req).read())["rows"]
    row = next(r for r in rows if r["id"] == request_id)
    return [(a["provider"], a["class"], a.get("hedge", False)) for a in row["attempts"]]


def test_openai_sdk_stream_gets_the_hedge_and_the_slow_attempt_is_cancelled(tmp_path, fakes):
    slow, fast = fakes
    gw = hedged(tmp_path, slow, fast)
    try:
        client = openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
        with client.chat.completions.with_streaming_response.create(
                model="auto", stream=True,
                messages=[{"role": "user", "content": "hello"}]) as resp:
            assert resp.headers["x-gateway-provider"] == "fast"
            request_id = resp.headers["x-request-id"]
            text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
        assert text == "fast: hello"
        assert attempts(gw, request_id) == [("slow", "outrun", False), ("fast", "ok", True)]
    finally:
        gw.stop()


def test_anthropic_sdk_stream_translated_gets_the_hedge(tmp_path, fakes):
    slow, fast = fakes
    gw = hedged(tmp_path, slow, fast)
    try:
        client = anthropic.Anthropic(base_url=gw.url, api_key=gw.key, max_retries=0)
        with client.messages.stream(model="claude-sonnet-4-5", max_tokens=100,
                                    messages=[{"role": "user", "content": "hi"}]) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
        assert text == "fast: hi"
        assert final.stop_reason == "end_turn"
    finally:
        gw.stop()


def test_off_by_default_the_request_waits_for_the_first_provider(tmp_path, fakes):
    slow, fast = fakes
    slow.script("delay:1500")
    gw = Baton(tmp_path, providers(slow, fast))
    try:
        client = openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
        started = time.monotonic()
        r = client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": "hello"}])
        assert r.headers["x-gateway-provider"] == "slow"
        assert time.monotonic() - started >= 1.5
        assert fast.stats()["hits"] == 0
    finally:
        gw.stop()
