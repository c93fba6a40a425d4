"""Structured output an application can build on, with the libraries applications use: the
OpenAI SDK's `parse()`, instructor, LangChain's `with_structured_output` and pydantic-ai's
`NativeOutput`, through the real `baton serve`, against fakes that answer the way small models
and free tiers do (a Markdown fence, prose around the object, an object cut at the token limit,
one that breaks the schema). Each library gets its object, with its own retries off: a fenced or
prosy answer is repaired (and says so), anything else falls over to the next provider."""
import openai
import pytest
from pydantic import BaseModel

from conftest import Baton, Fake


class Estimate(BaseModel):
    total: float
    currency: str


GOOD = '{"total": 12.5, "currency": "EUR"}'


@pytest.fixture
def pair(tmp_path):
    a, b = Fake("a"), Fake("b")
    gw = Baton(tmp_path, [
        {"id": "a", "kind": "openai-compatible", "baseUrl": a.url + "/v1", "models": ["m"],
         "priority": 1},
        {"id": "b", "kind": "openai-compatible", "baseUrl": b.url + "/v1", "models": ["m"],
         "priority": 2}])
    yield a, b, gw
    gw.stop()
    a.stop()
    b.stop()


def test_openai_parse_gets_the_object_from_a_fenced_answer_and_says_repaired(pair):
    a, b, gw = pair
    a.script("text:Here is your estimate:\n```json\n" + GOOD + "\n```\nAnything else?")
    client = openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    raw = client.chat.completions.with_raw_response.parse(
        model="auto", response_format=Estimate,
        messages=[{"role": "user", "content": "estimate the job"}])
    assert raw.headers["x-baton-output"] == "repaired"
    assert raw.headers["x-gateway-provider"] == "a"
    parsed = raw.parse().choices[0].message.parsed
    assert parsed == Estimate(total=12.5, currency="EUR")


def test_openai_parse_gets_the_next_providers_object_when_the_first_breaks_the_schema(pair):
    a, b, gw = pair
    a.script('text:{"total": "twelve", "currency": "EUR"}')
    b.script("text:" + GOOD)
    client = openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    raw = client.chat.completions.with_raw_response.parse(
        model="auto", response_format=Estimate,
        messages=[{"role": "user", "content": "estimate the job"}])
    assert raw.headers["x-gateway-provider"] == "b"
    assert raw.headers["x-baton-output"] == "valid"
    assert raw.parse().choices[0].message.parsed.total == 12.5
    assert "a/m=invalid_output" in raw.headers["x-gateway-attempt-details"]


def test_instructor_json_mode_gets_the_object_out_of_prose(pair):
    import instructor
    a, b, gw = pair
    a.script("text:Sure! " + GOOD + " Let me know if you need more.")
    client = instructor.from_openai(openai.OpenAI(base_url=gw.base_url, api_key=gw.key,
                                                  max_retries=0), mode=instructor.Mode.JSON)
    out = client.chat.completions.create(model="auto", response_model=Estimate, max_retries=0,
                                         messages=[{"role": "user", "content": "estimate"}])
    # instructor hands back its own subclass of the model: compare the fields.
    assert out.model_dump() == {"total": 12.5, "currency": "EUR"}
    assert b.stats()["hits"] == 0


def test_langchain_with_structured_output_is_not_handed_an_object_cut_at_the_limit(pair):
    from langchain_openai import ChatOpenAI
    a, b, gw = pair
    # Six words: the request's limit of four stops it inside the object.
    a.script('text:{"total": 12.5, "currency": "EUR", "note": "x"}')
    b.script("text:" + GOOD)
    llm = ChatOpenAI(model="auto", base_url=gw.base_url, api_key=gw.key, max_retries=0,
                     max_tokens=4)
    out = llm.with_structured_output(Estimate, method="json_schema").invoke("estimate")
    assert out == Estimate(total=12.5, currency="EUR")


def test_pydantic_ai_native_output_gets_an_object_when_the_first_answer_has_none(pair):
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    a, b, gw = pair
    a.script("text:I am not able to estimate that.")
    b.script("text:```\n" + GOOD + "\n```")
    model = OpenAIChatModel("auto", provider=OpenAIProvider(base_url=gw.base_url, api_key=gw.key))
    agent = Agent(model, output_type=NativeOutput(Estimate), retries=0)
    assert agent.run_sync("estimate").output == Estimate(total=12.5, currency="EUR")


def test_streams_say_their_verdict_in_a_comment_the_sdks_skip(pair):
    """A JSON stream's verdict closes it as an SSE comment (`: baton-output: …`): the OpenAI and
    Anthropic SDKs read on past it, and a Gemini stream gets none (Google's SDK would take it for
    an error)."""
    import anthropic
    from google import genai
    from google.genai import types
    a, b, gw = pair
    a.script(*["text:Here: " + GOOD] * 4)
    client = openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    with client.chat.completions.with_streaming_response.create(
            model="auto", stream=True, response_format={"type": "json_object"},
            messages=[{"role": "user", "content": "estimate"}]) as resp:
        text = "".join(c.choices[0].delta.content or "" for c in resp.parse() if c.choices)
    assert text == "Here: " + GOOD
    ant = anthropic.Anthropic(base_url=gw.url, api_key=gw.key, max_retries=0)
    with ant.messages.stream(
            model="claude-sonnet-4-5", max_tokens=200,
            messages=[{"role": "user", "content": "estimate"}],
            extra_body={"output_config": {"format": {
                "type": "json_schema", "schema": Estimate.model_json_schema()}}}) as s:
        assert "".join(s.text_stream) == "Here: " + GOOD
        assert s.get_final_message().stop_reason == "end_turn"
    g = genai.Client(api_key=gw.key, http_options=types.HttpOptions(
        base_url=gw.url, retry_options=types.HttpRetryOptions(attempts=1)))
    chunks = list(g.models.generate_content_stream(
        model="auto", contents="estimate",
        config=types.GenerateContentConfig(response_mime_type="application/json")))
    assert "".join(ch.text or "" for ch in chunks) == "Here: " + GOOD
    # And the raw stream does carry it, for whoever reads the bytes.
    import httpx
    with httpx.stream("POST", gw.base_url + "/chat/completions", headers={
            "authorization": "Bearer " + gw.key}, json={
            "model": "auto", "stream": True, "response_format": {"type": "json_object"},
            "messages": [{"role": "user", "content": "estimate"}]}) as r:
        raw = "".join(r.iter_text())
    assert ": baton-output: invalid (prose around the JSON value)\n\ndata: [DONE]" in raw, raw
