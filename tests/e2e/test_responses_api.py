"""The official `openai` SDK's Responses API (`client.responses`, what Codex speaks) against a
running `baton serve`, over OpenAI-compatible and Anthropic fake upstreams."""
import json

import openai
import pytest


def client(gw):
    return openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)


WEATHER = [{"type": "function", "name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}]
PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
         "format": {"type": "grammar", "syntax": "lark",
                    "definition": "start: \"*** Begin Patch\" LF hunk+ \"*** End Patch\""}}


def test_create_not_streamed(gateway):
    raw = client(gateway).responses.with_raw_response.create(
        model="auto", instructions="Be brief.", input="hello there", max_output_tokens=50)
    assert raw.headers["x-gateway-provider"] == "a"
    r = raw.parse()
    assert r.object == "response" and r.status == "completed"
    assert r.output_text == "a: hello there"
    assert r.usage.input_tokens == 11 and r.usage.output_tokens == 7
    sent = gateway.a.stats()["last"]
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sent["max_tokens"] == 50


def test_stream_events_satisfy_the_sdk_helpers(gateway):
    c = client(gateway)
    with c.responses.stream(model="auto", input="one two three") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "a: one two three"
    assert final.output_text == "a: one two three"
    assert final.usage.output_tokens == 7
    # Every event in order, numbered.
    events = list(c.responses.create(model="auto", input="hi", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"


def test_reasoning_from_the_upstream_streams_as_a_summary_the_sdk_reads(gateway):
    gateway.a.script("thinks")
    c = client(gateway)
    with c.responses.stream(model="a/a-model", input="why") as stream:
        summary = "".join(e.delta for e in stream
                          if e.type == "response.reasoning_summary_text.delta")
        final = stream.get_final_response()
    assert summary.startswith("step 0. "), summary
    assert final.output[0].type == "reasoning"
    assert final.output[0].summary[0].text == summary
    assert final.output_text == "a: why"


def test_function_call_round_trip(gateway):
    c = client(gateway)
    first = c.responses.create(model="auto", input="What's the weather in Paris?", tools=WEATHER)
    call = next(o for o in first.output if o.type == "function_call")
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    second = c.responses.create(model="auto", tools=WEATHER, input=[
        {"role": "user", "content": "What's the weather in Paris?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "18 C and sunny"},
    ])
    assert second.output_text.startswith("a: ")
    sent = gateway.a.stats()["last"]
    assert sent["messages"][-2]["tool_calls"][0]["id"] == call.call_id
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "18 C and sunny"}
    assert sent["tools"][0]["function"]["name"] == "get_weather"


def test_freeform_tool_comes_back_as_a_custom_tool_call_streamed_and_not(gateway):
    c = client(gateway)
    patch = "*** Begin Patch\n*** Add File: hi.txt\n+hi\n*** End Patch\n"
    args = json.dumps({"input": patch})
    gateway.a.script(f"tool:apply_patch:{args}", f"tool:apply_patch:{args}")
    r = c.responses.create(model="auto", input="add hi.txt", tools=[PATCH])
    item = r.output[-1]
    assert item.type == "custom_tool_call" and item.name == "apply_patch"
    assert item.input == patch
    sent = gateway.a.stats()["last"]
    fn = sent["tools"][0]["function"]
    assert fn["name"] == "apply_patch" and fn["parameters"]["required"] == ["input"]
    assert "*** Begin Patch" in fn["parameters"]["properties"]["input"]["description"]
    with c.responses.stream(model="auto", input="add hi.txt", tools=[PATCH]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert "response.custom_tool_call_input.done" in kinds
    assert final.output[-1].type == "custom_tool_call" and final.output[-1].input == patch


def test_through_an_anthropic_upstream(anthropic_gateway):
    r = client(anthropic_gateway).responses.create(model="claude-real-model", input="hello")
    assert r.output_text == "a: hello"
    sent = anthropic_gateway.a.stats()["last"]
    assert sent["messages"][-1]["role"] == "user"
    with client(anthropic_gateway).responses.stream(model="claude-real-model", input="one two") as s:
        final = s.get_final_response()
    assert final.output_text == "a: one two"
    assert final.usage.output_tokens > 0


def test_a_break_after_content_is_response_failed_not_a_silent_end(gateway):
    gateway.a.script("stream-dies")
    events = list(client(gateway).responses.create(model="a/a-model", input="one two three", stream=True))
    kinds = [e.type for e in events]
    assert "response.output_text.delta" in kinds
    assert kinds[-1] == "response.failed", kinds
    assert "stopped mid-answer" in events[-1].response.error.message
    assert "response.completed" not in kinds


def test_bad_requests_get_openai_errors(gateway):
    c = client(gateway)
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model="auto", input="hi", previous_response_id="resp_123")
    assert "whole conversation" in e.value.message
    assert e.value.body["param"] == "previous_response_id"
    assert e.value.body["code"] == "previous_response_not_found"
    assert e.value.body["message"].startswith("Previous response with id 'resp_123' not found.")
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model="auto", input=[])
    assert e.value.body["param"] == "input"


@pytest.fixture
def responses_gateway(tmp_path):
    """Baton in front of a fake Responses upstream (kind `openai-responses`)."""
    from conftest import Baton, Fake
    up = Fake("r")
    baton = Baton(tmp_path, [{"id": "resp", "kind": "openai-responses", "baseUrl": up.url + "/v1",
                              "models": ["gpt-real"]}])
    baton.a = up
    yield baton
    if baton.proc.poll() is None:
        baton.stop()
    up.stop()


def test_same_format_to_a_responses_upstream_passes_through_for_the_sdk(responses_gateway):
    c = client(responses_gateway)
    r = c.responses.create(model="gpt-real", input="hello", prompt_cache_key="k1")
    assert r.id == "resp_fake" and r.output_text == "r: hello"
    assert responses_gateway.a.stats()["last"]["prompt_cache_key"] == "k1"
    with c.responses.stream(model="gpt-real", input="one two") as s:
        final = s.get_final_response()
    assert final.output_text == "r: one two"
    assert final.usage.input_tokens_details.cached_tokens == 3
    # A Chat Completions client on the same upstream, translated.
    chat = c.chat.completions.create(model="resp/gpt-real", messages=[{"role": "user", "content": "hi"}])
    assert chat.choices[0].message.content == "r: hi"


KINDS = {
    "openai-compatible": lambda url: url + "/v1",
    "anthropic": lambda url: url + "/v1",
    "gemini": lambda url: url + "/v1beta",
    "openai-responses": lambda url: url + "/v1",
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
          "required": ["city", "temp_c"], "additionalProperties": False}


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_sdk_against_every_upstream_kind(tmp_path, kind):
    """`client.responses` streamed and not, a function tool and `text.format` json_schema, over
    each upstream kind: the answer in the Responses shape, the structured-output ask in the
    upstream's own."""
    from conftest import Baton, Fake
    up = Fake("u")
    gw = Baton(tmp_path, [{"id": "u", "kind": kind, "baseUrl": KINDS[kind](up.url),
                           "models": ["u-model"]}])
    try:
        c = client(gw)
        up.script('tool:get_weather:{"city": "Paris"}')
        r = c.responses.create(model="u-model", input="Weather in Paris?", tools=WEATHER)
        call = next(o for o in r.output if o.type == "function_call")
        assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
        up.script('tool:get_weather:{"city": "Rome"}')
        with c.responses.stream(model="u-model", input="And Rome?", tools=WEATHER) as s:
            final = s.get_final_response()
        call = next(o for o in final.output if o.type == "function_call")
        assert json.loads(call.arguments) == {"city": "Rome"}
        with c.responses.stream(model="u-model", input="one two") as s:
            assert s.get_final_response().output_text == "u: one two"

        fmt = {"format": {"type": "json_schema", "name": "weather", "schema": SCHEMA, "strict": True}}
        r = c.responses.create(model="u-model", input="Weather?", text=fmt)
        assert r.status == "completed"
        sent = up.stats()["last"]
        if kind == "openai-compatible":
            assert sent["response_format"]["json_schema"]["schema"] == SCHEMA
        elif kind == "anthropic":
            assert sent["output_config"]["format"] == {"type": "json_schema", "schema": SCHEMA}
        elif kind == "gemini":
            cfg = sent["body"]["generationConfig"]  # the fake keeps Gemini's path beside it
            assert cfg["responseMimeType"] == "application/json"
            assert cfg["responseJsonSchema"] == SCHEMA
        else:
            assert sent["text"] == fmt, "a Responses upstream gets the client's own body"
    finally:
        gw.stop()
        up.stop()
