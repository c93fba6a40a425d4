"""The official `anthropic` Python SDK against a running `baton serve` whose upstreams are
OpenAI-compatible: Baton translates both ways."""
import anthropic
import pytest


def client(gw):
    return anthropic.Anthropic(base_url=gw.url, api_key=gw.key, max_retries=0)


def test_message(gateway):
    raw = client(gateway).messages.with_raw_response.create(
        model="claude-opus-4-8", max_tokens=200, system="be brief",
        messages=[{"role": "user", "content": "hello there"}])
    assert raw.headers["x-gateway-provider"] == "a"
    msg = raw.parse()
    assert msg.content[0].type == "text"
    assert msg.content[0].text == "a: hello there"
    assert msg.stop_reason == "end_turn"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (11, 7)
    # The name the client asked for (Claude Code keeps its thinking only under it); the
    # served one is in x-gateway-model.
    assert msg.model == "claude-opus-4-8"
    assert raw.headers["x-gateway-model"] == "a-model"


def test_stream(gateway):
    with client(gateway).messages.stream(
            model="claude-opus-4-8", max_tokens=200,
            messages=[{"role": "user", "content": "one two three"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "a: one two three"
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 7


def test_tool_use_round_trip(gateway):
    c = client(gateway)
    tools = [{"name": "get_weather", "description": "Weather for a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
    messages = [{"role": "user", "content": "What's the weather in Paris?"}]
    first = c.messages.create(model="claude-opus-4-8", max_tokens=200, tools=tools, messages=messages)
    assert first.stop_reason == "tool_use"
    call = next(b for b in first.content if b.type == "tool_use")
    assert call.name == "get_weather" and call.input == {"city": "Paris"}
    messages += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18 C"}]}]
    second = c.messages.create(model="claude-opus-4-8", max_tokens=200, tools=tools, messages=messages)
    assert second.content[0].type == "text"
    sent = gateway.a.stats()["last"]
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "18 C"}


def test_streamed_tool_use(gateway):
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    with client(gateway).messages.stream(
            model="claude-opus-4-8", max_tokens=200, tools=tools,
            messages=[{"role": "user", "content": "weather?"}]) as stream:
        final = stream.get_final_message()
    call = next(b for b in final.content if b.type == "tool_use")
    assert call.input == {"city": "Paris"}
    assert final.stop_reason == "tool_use"


def test_failover_and_errors(gateway):
    gateway.a.script("429")
    msg = client(gateway).messages.create(model="claude-opus-4-8", max_tokens=50,
                                          messages=[{"role": "user", "content": "x"}])
    assert msg.content[0].text == "b: x"
    with pytest.raises(anthropic.NotFoundError):
        client(gateway).messages.create(model="gpt-nope", max_tokens=50,
                                        messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=gateway.url, api_key="wrong", max_retries=0).messages.create(
            model="claude-opus-4-8", max_tokens=50, messages=[{"role": "user", "content": "x"}])
    gateway.b.script("429")
    with pytest.raises(anthropic.RateLimitError):
        client(gateway).messages.create(model="claude-opus-4-8", max_tokens=50,
                                        messages=[{"role": "user", "content": "x"}])


def test_stream_broken_mid_answer_raises(gateway):
    gateway.a.script("stream-dies")
    with pytest.raises(anthropic.APIError):
        with client(gateway).messages.stream(
                model="claude-opus-4-8", max_tokens=200,
                messages=[{"role": "user", "content": "one two three four"}]) as stream:
            for _ in stream.text_stream:
                pass
    assert gateway.b.stats()["hits"] == 0


def test_count_tokens(gateway):
    raw = client(gateway).messages.with_raw_response.count_tokens(
        model="claude-opus-4-8", messages=[{"role": "user", "content": "x" * 400}])
    # Served by a model of no known tokenizer: the stated estimate (four characters a token
    # and the message's own tokens), said to be one.
    assert raw.headers["x-baton-token-count"] == "estimate"
    assert raw.parse().input_tokens == 107


# The same client against an Anthropic upstream: Baton passes the body through.

def test_message_via_anthropic_upstream(anthropic_gateway):
    gw = anthropic_gateway
    msg = client(gw).messages.create(model="claude-opus-4-8", max_tokens=200, system="be brief",
                                     messages=[{"role": "user", "content": "hello there"}])
    assert msg.content[0].text == "a: hello there"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (11, 7)
    assert gw.a.stats()["last"]["model"] == "claude-real-model"


def test_stream_via_anthropic_upstream(anthropic_gateway):
    with client(anthropic_gateway).messages.stream(
            model="claude-opus-4-8", max_tokens=200,
            messages=[{"role": "user", "content": "one two three"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "a: one two three"
    assert final.stop_reason == "end_turn"


def test_tool_use_round_trip_via_anthropic_upstream(anthropic_gateway):
    gw = anthropic_gateway
    c = client(gw)
    tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    gw.a.script('tool:get_weather:{"city": "Paris"}')
    first = c.messages.create(model="claude-opus-4-8", max_tokens=200, tools=tools,
                              messages=[{"role": "user", "content": "weather?"}])
    call = next(b for b in first.content if b.type == "tool_use")
    assert call.input == {"city": "Paris"} and first.stop_reason == "tool_use"
    second = c.messages.create(model="claude-opus-4-8", max_tokens=200, tools=tools, messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18 C"}]}])
    assert second.content[0].type == "text"
    sent = gw.a.stats()["last"]["messages"]
    assert sent[-1]["content"][0]["type"] == "tool_result", "tool_result blocks reach the Anthropic upstream as sent"
