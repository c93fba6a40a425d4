"""The official `openai` Python SDK against a running `baton serve`."""
import json
import pathlib
import sqlite3

import httpx
import jsonschema
import openai
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def client(gw, **kw):
    return openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0, **kw)


def test_non_streaming(gateway):
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hello there"}], temperature=0.1)
    assert raw.headers["x-gateway-provider"] == "a"
    assert raw.headers["x-gateway-model"] == "a-model"
    assert raw.headers["x-gateway-attempts"] == "1"
    resp = raw.parse()
    assert resp.choices[0].message.content == "a: hello there"
    assert resp.usage.total_tokens == 18


def test_streaming_with_usage(gateway):
    stream = client(gateway).chat.completions.create(
        model="auto", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "one two three"}])
    text, usage = "", None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage:
            usage = chunk.usage
    assert text == "a: one two three"
    assert usage.completion_tokens == 7


def test_tool_call_round_trip(gateway):
    c = client(gateway)
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    messages = [{"role": "user", "content": "What's the weather in Paris?"}]
    first = c.chat.completions.create(model="auto", messages=messages, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"}]
    second = c.chat.completions.create(model="auto", messages=messages, tools=tools)
    assert second.choices[0].message.content.startswith("a: ")
    sent = gateway.a.stats()["last"]
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"}
    assert sent["tools"] == tools


def test_streamed_tool_call(gateway):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    stream = client(gateway).chat.completions.create(
        model="auto", stream=True, tools=tools, messages=[{"role": "user", "content": "weather?"}])
    args, name = "", None
    for chunk in stream:
        for tc in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            name = name or tc.function.name
            args += tc.function.arguments or ""
    assert name == "get_weather"
    assert json.loads(args) == {"city": "Paris"}


def test_failover_on_429_and_503(gateway):
    gateway.a.script("429")
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "x"}])
    assert raw.headers["x-gateway-provider"] == "b"
    assert raw.headers["x-gateway-attempts"] == "2"
    assert raw.parse().choices[0].message.content == "b: x"
    # a is cooling (Retry-After 30 s): the stream goes straight to b.
    text = "".join(ch.choices[0].delta.content or "" for ch in client(gateway).chat.completions.create(
        model="auto", stream=True, messages=[{"role": "user", "content": "y"}]) if ch.choices)
    assert text == "b: y"
    assert gateway.a.stats()["hits"] == 1


def test_errors_are_openai_errors(gateway):
    c = client(gateway)
    with pytest.raises(openai.NotFoundError) as e:
        c.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert "auto" in e.value.message
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gateway.base_url, api_key="wrong", max_retries=0).models.list()
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="auto", messages=[])
    assert e.value.body["param"] == "messages"
    gateway.a.script("429")
    gateway.b.script("429")
    with pytest.raises(openai.RateLimitError) as e:
        c.chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}])
    assert int(e.value.response.headers["retry-after"]) >= 1


def test_models_list(gateway):
    ids = [m.id for m in client(gateway).models.list()]
    assert ids == ["auto", "a", "a/a-model", "b", "b/b-model"]


def test_graceful_shutdown_flushes_the_log(gateway):
    c = client(gateway)
    for i in range(5):
        c.chat.completions.create(model="auto", messages=[{"role": "user", "content": f"n{i}"}])
    assert gateway.stop() == 0
    rows = sqlite3.connect(gateway.data / "baton.db").execute(
        "SELECT status, provider FROM request_log").fetchall()
    assert rows.count((200, "a")) == 5


def test_health_needs_no_key(gateway):
    r = httpx.get(gateway.url + "/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_example_config_matches_schema():
    schema = json.loads((ROOT / "config.schema.json").read_text())
    example = json.loads((ROOT / "config.example.json").read_text())
    jsonschema.validate(example, schema)


def test_stream_broken_after_content_raises_in_the_sdk(gateway):
    """A stream that breaks mid-answer must not look complete: the SDK raises."""
    gateway.a.script("stream-dies")
    stream = client(gateway).chat.completions.create(
        model="auto", stream=True, messages=[{"role": "user", "content": "one two three four"}])
    received = ""
    with pytest.raises(openai.APIError) as e:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received += chunk.choices[0].delta.content
    assert received == "a: one "
    assert "incomplete" in str(e.value)
    assert gateway.b.stats()["hits"] == 0, "no fallback after the first byte"


def test_serve_says_where_the_ui_and_the_admin_key_are_and_a_browser_lands_there(gateway):
    import select
    import time
    import urllib.request

    import os

    # Raw reads: the text wrapper's buffer would hide lines from select().
    # A read can end mid-line: wait for everything the test looks for, not just its start.
    fd, seen, deadline = gateway.proc.stderr.fileno(), "", time.time() + 10
    wanted = [f"Web UI: {gateway.url}/ui/", str(gateway.data / "admin.key")]
    while not all(w in seen for w in wanted) and time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            seen += os.read(fd, 65536).decode(errors="replace")
    assert f"Web UI: {gateway.url}/ui/" in seen, seen
    assert str(gateway.data / "admin.key") in seen, seen
    # A browser opening the bare address lands on the UI; a script gets the map.
    page = urllib.request.urlopen(urllib.request.Request(gateway.url + "/", headers={"accept": "text/html"}))
    assert page.geturl() == gateway.url + "/ui/"
    assert b"<title>Baton</title>" in page.read()
    info = json.loads(urllib.request.urlopen(gateway.url + "/").read())
    assert info["ui"] == "/ui/" and info["openai_base_url"] == "/v1"
    assert info["adminKeyFile"] == str(gateway.data / "admin.key")
