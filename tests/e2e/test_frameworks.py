"""The client libraries people build with, through Baton, against the strict fake upstreams.

Each cell drives a real library (LangChain's OpenAI and Anthropic chat models and its Responses
mode, openai-agents, pydantic-ai, instructor, LiteLLM, the official SDKs for parallel tool calls
and for stopping at the output limit) through the real `baton serve` to one upstream
kind. The fakes refuse what the real APIs refuse, so a stray field or a broken translation fails
here. The cells pick the translator paths that differ: each client dialect (Chat Completions,
Messages, Responses) to each upstream kind it is translated to; the same-format hops are the
official SDK tests' (test_openai_sdk.py, test_anthropic_sdk.py, test_responses_api.py).
"""
import pytest
from pydantic import BaseModel

from conftest import Baton, Fake

KINDS = {
    "openai-compatible": "/v1",
    "anthropic": "/v1",
    "gemini": "/v1beta",
    "openai-responses": "/v1",
}


class Weather(BaseModel):
    city: str
    temp_c: float


@pytest.fixture(scope="module")
def gateways(tmp_path_factory):
    """One fake upstream and one Baton per upstream kind, shared by the module's cells."""
    made = {}

    def get(kind):
        if kind not in made:
            up = Fake("u")
            tmp = tmp_path_factory.mktemp(kind)
            gw = Baton(tmp, [{"id": "u", "kind": kind, "baseUrl": up.url + KINDS[kind],
                              "models": ["u-model"]}], model_map={"claude-*": "u", "gpt-*": "u"})
            made[kind] = (up, gw)
        return made[kind]

    yield get
    for up, gw in made.values():
        gw.stop()
        up.stop()


def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"18 C in {city}"


@pytest.mark.parametrize("kind", ["anthropic", "gemini", "openai-responses"])
def test_langchain_chat_openai(gateways, kind):
    from langchain_openai import ChatOpenAI
    up, gw = gateways(kind)
    llm = ChatOpenAI(model="gpt-test", base_url=gw.base_url, api_key=gw.key, max_retries=0,
                     stream_usage=True)
    assert llm.invoke("hello there").content == "u: hello there"
    chunks = list(llm.stream("one two"))
    assert "".join(c.content for c in chunks) == "u: one two"
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert len(usage) == 1 and usage[0]["input_tokens"] > 0, usage
    msg = llm.bind_tools([get_weather]).invoke("weather in Paris?")
    assert msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather"
    parsed = llm.with_structured_output(Weather, method="json_schema").invoke("weather?")
    assert isinstance(parsed, Weather)


@pytest.mark.parametrize("kind", ["openai-compatible", "gemini"])
def test_langchain_chat_anthropic(gateways, kind):
    from langchain_anthropic import ChatAnthropic
    up, gw = gateways(kind)
    llm = ChatAnthropic(model="claude-test", base_url=gw.url, api_key=gw.key, max_retries=0,
                        max_tokens=200)
    assert llm.invoke("hello there").content == "u: hello there"
    assert "".join(c.content if isinstance(c.content, str) else "" for c in llm.stream("one two")) == "u: one two"
    msg = llm.bind_tools([get_weather]).invoke("weather in Paris?")
    assert msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather"
    parsed = llm.with_structured_output(Weather, method="json_schema").invoke("weather?")
    assert isinstance(parsed, Weather)


@pytest.mark.parametrize("kind", ["anthropic", "openai-compatible"])
def test_langchain_responses_api(gateways, kind):
    from langchain_openai import ChatOpenAI
    up, gw = gateways(kind)
    llm = ChatOpenAI(model="gpt-test", base_url=gw.base_url, api_key=gw.key, max_retries=0,
                     use_responses_api=True)
    assert llm.invoke("hello there").text == "u: hello there"
    msg = llm.bind_tools([get_weather]).invoke("weather in Paris?")
    assert msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather"


@pytest.mark.parametrize("kind", ["anthropic", "gemini"])
def test_openai_agents_tool_loop(gateways, kind):
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents import OpenAIResponsesModel
    from openai import AsyncOpenAI
    set_tracing_disabled(True)
    up, gw = gateways(kind)
    client = AsyncOpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    tool = function_tool(get_weather)
    agent = Agent(name="w", instructions="Use the tool.", tools=[tool],
                  model=OpenAIResponsesModel(model="gpt-test", openai_client=client))
    result = Runner.run_sync(agent, "weather in Paris?")
    # The fake calls the tool first, then answers the user's question once it has the result.
    assert result.final_output == "u: weather in Paris?"
    kinds = [i.type for i in result.new_items]
    assert "tool_call_item" in kinds and "tool_call_output_item" in kinds, kinds


@pytest.mark.parametrize("kind", ["anthropic", "gemini"])
def test_pydantic_ai_native_output(gateways, kind):
    # pydantic-ai's own AnthropicModel (2.38) fails inside the anthropic 2.16 SDK before any
    # request is made, so the Messages dialect is LangChain's cell above.
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    up, gw = gateways(kind)
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=gw.base_url, api_key=gw.key))
    agent = Agent(model, output_type=NativeOutput(Weather))
    out = agent.run_sync("weather?").output
    assert isinstance(out, Weather)


def test_instructor_json_schema(gateways):
    import instructor
    import openai
    up, gw = gateways("gemini")
    client = instructor.from_openai(openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0),
                                    mode=instructor.Mode.JSON_SCHEMA)
    out = client.chat.completions.create(model="gpt-test", response_model=Weather, max_retries=0,
                                         messages=[{"role": "user", "content": "weather?"}])
    assert isinstance(out, Weather)


def get_time(city: str) -> str:
    """Local time in a city."""
    return f"12:00 in {city}"


WEATHER_AND_TIME = [
    {"type": "function", "function": {"name": f.__name__, "description": f.__doc__, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    for f in (get_weather, get_time)
]


@pytest.mark.parametrize("kind", ["anthropic", "gemini"])
def test_openai_sdk_two_parallel_tool_calls(gateways, kind):
    """Two calls in one turn reach the client as two tool_calls with their own ids, and both
    results go back in one turn (the fakes refuse results that do not pair with the calls)."""
    from openai import OpenAI
    up, gw = gateways(kind)
    client = OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    messages = [{"role": "user", "content": "weather and time in Paris, in parallel"}]
    first = client.chat.completions.create(model="gpt-test", messages=messages,
                                           tools=WEATHER_AND_TIME, max_tokens=200)
    calls = first.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_time"], first
    assert calls[0].id != calls[1].id
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    for c, f in zip(calls, (get_weather, get_time)):
        messages.append({"role": "tool", "tool_call_id": c.id, "content": f("Paris")})
    done = client.chat.completions.create(model="gpt-test", messages=messages,
                                          tools=WEATHER_AND_TIME, max_tokens=200)
    assert done.choices[0].finish_reason == "stop" and done.choices[0].message.content


@pytest.mark.parametrize("kind", ["openai-compatible", "gemini", "openai-responses"])
def test_anthropic_sdk_stops_at_max_tokens(gateways, kind):
    """An answer cut at the limit says so in the Messages API's terms, streamed or not."""
    import anthropic
    up, gw = gateways(kind)
    client = anthropic.Anthropic(base_url=gw.url, api_key=gw.key, max_retries=0)
    long = " ".join(f"w{i}" for i in range(40))
    msg = client.messages.create(model="claude-test", max_tokens=16,
                                 messages=[{"role": "user", "content": long}])
    assert msg.stop_reason == "max_tokens", msg
    assert "w39" not in msg.content[0].text
    with client.messages.stream(model="claude-test", max_tokens=16,
                                messages=[{"role": "user", "content": long}]) as s:
        final = s.get_final_message()
    assert final.stop_reason == "max_tokens", final


@pytest.mark.parametrize("kind", ["anthropic", "gemini"])
def test_openai_responses_incomplete_at_max_output_tokens(gateways, kind):
    """The Responses API's way: status incomplete, incomplete_details.reason max_output_tokens."""
    from openai import OpenAI
    up, gw = gateways(kind)
    client = OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    long = " ".join(f"w{i}" for i in range(40))
    r = client.responses.create(model="gpt-test", input=long, max_output_tokens=16)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens", r
    with client.responses.stream(model="gpt-test", input=long, max_output_tokens=16) as s:
        events = [e.type for e in s]
    assert "response.incomplete" in events, events


@pytest.mark.parametrize("kind", ["anthropic", "gemini"])
def test_litellm_as_a_client(gateways, kind, monkeypatch):
    """LiteLLM pointed at Baton, in both its OpenAI and Anthropic modes (streamed Anthropic is
    the path a stray field once broke)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm
    up, gw = gateways(kind)
    r = litellm.completion(model="openai/gpt-test", api_base=gw.base_url, api_key=gw.key,
                           messages=[{"role": "user", "content": "hello there"}], num_retries=0)
    assert r.choices[0].message.content == "u: hello there"
    r = litellm.completion(model="openai/gpt-test", api_base=gw.base_url, api_key=gw.key,
                           messages=[{"role": "user", "content": "weather in Paris?"}],
                           tools=WEATHER_AND_TIME[:1], num_retries=0)
    assert r.choices[0].message.tool_calls[0].function.name == "get_weather"
    chunks = litellm.completion(model="anthropic/claude-test", api_base=gw.url, api_key=gw.key,
                                messages=[{"role": "user", "content": "one two"}], max_tokens=200,
                                stream=True, num_retries=0)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "u: one two"
