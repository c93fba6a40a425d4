"""Client keys through the official SDKs against the real `baton serve`: a key's own rate limit
surfaces as the SDK's RateLimitError with Retry-After, a tier cap as PermissionDeniedError, and
the key's usage is what the SDK was told it used."""
import anthropic
import openai
import pytest

from conftest import admin


def test_a_clients_rate_limit_is_a_rate_limit_error_with_retry_after(gateway):
    made = admin(gateway, "POST", "/admin/keys", {"label": "script", "rpm": 1})
    c = openai.OpenAI(base_url=gateway.base_url, api_key=made["key"], max_retries=0)
    first = c.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.RateLimitError) as e:
        c.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["code"] == "client_rate_limited"
    assert 55 <= int(e.value.response.headers["retry-after"]) <= 60
    # Usage attribution: the key's row says what the SDK saw.
    usage = admin(gateway, "GET", "/admin/usage?by=client")
    row = next(r for r in usage["rows"] if r["key"] == made["id"])
    assert row["requests"] == 1
    assert row["inputTokens"] == first.usage.prompt_tokens
    assert row["outputTokens"] == first.usage.completion_tokens
    # The gateway's own key is not affected.
    own = openai.OpenAI(base_url=gateway.base_url, api_key=gateway.key, max_retries=0)
    own.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])


def test_a_key_limited_to_one_provider_through_the_anthropic_sdk(gateway):
    made = admin(gateway, "POST", "/admin/keys", {"label": "b-only", "allow": ["b"]})
    c = anthropic.Anthropic(base_url=gateway.url, api_key=made["key"], max_retries=0)
    ok = c.messages.create(model="auto", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    assert ok.content[0].text.startswith("b:")
    with pytest.raises(anthropic.PermissionDeniedError) as e:
        c.messages.create(model="a/a-model", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    assert "may use: b" in str(e.value)
    assert gateway.a.stats()["hits"] == 0
