"""The official `google-genai` SDK as a client of Baton's Gemini API, against every upstream
kind's strict fake: plain and streamed answers, a function-calling turn and its answer, JSON
output to a schema, token counts, the model list, and errors raised as the SDK's own types."""
import pytest
from google import genai
from google.genai import errors, types

from conftest import Baton, Fake

KINDS = {
    "openai-compatible": "/v1",
    "anthropic": "/v1",
    "gemini": "/v1beta",
    "openai-responses": "/v1",
}


@pytest.fixture(scope="module")
def gateways(tmp_path_factory):
    """One fake upstream and one Baton per upstream kind, shared by the module's cells."""
    made = {}

    def get(kind):
        if kind not in made:
            up = Fake("u")
            tmp = tmp_path_factory.mktemp(kind)
            gw = Baton(tmp, [{"id": "u", "kind": kind, "baseUrl": up.url + KINDS[kind],
                              "models": ["u-model"]}], model_map={"gemini-*": "u"})
            made[kind] = (up, gw)
        return made[kind]

    yield get
    for up, gw in made.values():
        gw.stop()
        up.stop()


def client(gw):
    return genai.Client(api_key=gw.key, http_options=types.HttpOptions(
        base_url=gw.url, retry_options=types.HttpRetryOptions(attempts=1)))


@pytest.mark.parametrize("kind", list(KINDS))
def test_generate_and_stream(gateways, kind):
    up, gw = gateways(kind)
    up.script("ok", "ok")
    c = client(gw)
    r = c.models.generate_content(
        model="gemini-2.5-flash", contents="hello there",
        config=types.GenerateContentConfig(system_instruction="be brief", max_output_tokens=50,
                                           temperature=0.3))
    assert r.text == "u: hello there"
    assert r.usage_metadata.prompt_token_count > 0
    assert r.candidates[0].finish_reason == types.FinishReason.STOP
    chunks = list(c.models.generate_content_stream(model="gemini-2.5-flash", contents="stream it"))
    assert "".join(ch.text or "" for ch in chunks) == "u: stream it"
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.total_token_count > 0


@pytest.mark.parametrize("kind", list(KINDS))
def test_function_calling_round_trip(gateways, kind):
    up, gw = gateways(kind)
    up.script('tool:get_weather:{"city": "Paris"}', "ok")
    c = client(gw)
    tool = types.Tool(function_declarations=[types.FunctionDeclaration(
        name="get_weather", description="Weather for a city.",
        parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"]})])
    config = types.GenerateContentConfig(
        tools=[tool], automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    history = [types.Content(role="user", parts=[types.Part(text="weather in Paris?")])]
    r = c.models.generate_content(model="gemini-2.5-flash", contents=history, config=config)
    calls = r.function_calls
    assert calls and calls[0].name == "get_weather" and calls[0].args == {"city": "Paris"}
    history.append(r.candidates[0].content)
    history.append(types.Content(role="user", parts=[types.Part.from_function_response(
        name="get_weather", response={"output": "18 C"})]))
    r = c.models.generate_content(model="gemini-2.5-flash", contents=history, config=config)
    assert r.text.startswith("u: ")
    assert "18 C" in str(up.stats()["last"]), "the function's result reached the upstream"


@pytest.mark.parametrize("kind", ["openai-compatible", "gemini"])
def test_json_to_a_schema_and_counting(gateways, kind):
    up, gw = gateways(kind)
    c = client(gw)
    r = c.models.generate_content(
        model="gemini-2.5-flash", contents="weather as JSON",
        config=types.GenerateContentConfig(response_mime_type="application/json",
                                           response_json_schema={
                                               "type": "object",
                                               "properties": {"city": {"type": "string"}},
                                               "required": ["city"]}))
    assert isinstance(r.parsed, dict) and "city" in r.parsed, r.text
    n = c.models.count_tokens(model="gemini-2.5-flash", contents="count these words")
    assert n.total_tokens > 0
    names = [m.name for m in c.models.list()]
    assert "models/u/u-model" in names, names


def test_errors_are_the_sdks_own(gateways):
    up, gw = gateways("openai-compatible")
    bad = genai.Client(api_key="not-the-key", http_options=types.HttpOptions(
        base_url=gw.url, retry_options=types.HttpRetryOptions(attempts=1)))
    with pytest.raises(errors.ClientError) as e:
        bad.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert e.value.code == 401 and e.value.status == "UNAUTHENTICATED"
    up.script("429:30")
    good = client(gw)  # held: the SDK closes its connection when the client object goes
    with pytest.raises(errors.ClientError) as e:
        good.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert e.value.code == 429 and e.value.status == "RESOURCE_EXHAUSTED"
    assert "rate-limited" in e.value.message
