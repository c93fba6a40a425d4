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
