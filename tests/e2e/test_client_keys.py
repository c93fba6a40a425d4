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


def test_the_sdks_see_what_is_left_of_a_keys_limits_on_every_answer(gateway):
    """The official SDKs read a limited key's remaining requests and tokens from every answer,
    streamed or not, as they read a vendor's: OpenAI's `x-ratelimit-*` and, on the Messages API,
    Anthropic's `anthropic-ratelimit-*` (its reset an RFC 3339 time)."""
    import datetime

    made = admin(gateway, "POST", "/admin/keys", {"label": "paced", "rpm": 5, "tpm": 50000})
    c = openai.OpenAI(base_url=gateway.base_url, api_key=made["key"], max_retries=0)
    raw = c.chat.completions.with_raw_response.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    h = raw.headers
    assert (h["x-ratelimit-limit-requests"], h["x-ratelimit-remaining-requests"]) == ("5", "4")
    assert h["x-ratelimit-reset-requests"].endswith("s"), h["x-ratelimit-reset-requests"]
    assert (h["x-ratelimit-limit-tokens"], h["x-ratelimit-remaining-tokens"]) == ("50000", "50000")
    assert raw.parse().choices[0].message.content
    with c.chat.completions.with_streaming_response.create(
            model="auto", stream=True, messages=[{"role": "user", "content": "hi"}]) as s:
        assert s.headers["x-ratelimit-remaining-requests"] == "3"
        assert any(chunk for chunk in s.iter_lines())

    a = anthropic.Anthropic(base_url=gateway.url, api_key=made["key"], max_retries=0)
    raw = a.messages.with_raw_response.create(model="auto", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    h = raw.headers
    assert (h["anthropic-ratelimit-requests-limit"], h["anthropic-ratelimit-requests-remaining"]) == ("5", "2")
    reset = datetime.datetime.fromisoformat(h["anthropic-ratelimit-requests-reset"].replace("Z", "+00:00"))
    assert reset > datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)
    assert h["anthropic-ratelimit-tokens-limit"] == "50000"
    assert raw.parse().content[0].text
