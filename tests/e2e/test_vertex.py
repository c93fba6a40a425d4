"""Claude on Google Vertex AI as a provider, against the real `baton serve` and a fake as strict as
Google (a token endpoint verifying the service account's RS256 JWT, tokens that expire, model
routes that take only a live token, the account's project, region and models, and the body
Vertex takes). What Baton sends is compared with what Anthropic's own Vertex client sends
(`anthropic.AnthropicVertex`); Baton finds its credentials as Google's tools do
(GOOGLE_APPLICATION_CREDENTIALS); and the real Claude Code on its own subscription goes on with
the same model on Vertex when the subscription hits its cap mid-task, and comes back at the
reset. The service account's key is a test-only key in tests/fixtures/vertex/."""
import json
import os
import pathlib
import time

import anthropic

from conftest import Baton, Fake
from test_claude_code import claude_turn, on_default_model, on_subscription

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "vertex"
EMAIL = "baton-e2e@acme-prod-1.iam.gserviceaccount.com"
PROJECT, REGION = "acme-prod-1", "us-east5"
MODEL = "claude-sonnet-4-5@20250929"
TOKEN = "ya29.sdk-token-of-the-test-0001"


def vertex_fake(name, *models):
    return Fake(name, "--vertex", f"{PROJECT}:{REGION}",
                "--vertex-account", f"{EMAIL}:{FIXTURES / 'sa-public.der'}",
                "--vertex-models", ",".join(models or (MODEL,)), "--vertex-token", TOKEN)


def application_default(tmp_path, fake):
    """A service account's key file where Google's tools look for one, for the fake's endpoint."""
    key = tmp_path / "sa.json"
    key.write_text(json.dumps({
        "type": "service_account", "project_id": PROJECT, "private_key_id": "k1",
        "private_key": (FIXTURES / "sa-key.pem").read_text(), "client_email": EMAIL,
        "client_id": "1", "token_uri": fake.url + "/token"}))
    os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(key)


def vertex_provider(fake, models=(MODEL,), **extra):
    return {"id": "vx", "kind": "vertex-anthropic", "baseUrl": fake.url + "/v1", "region": REGION,
            "project": PROJECT, "models": list(models), **extra}


TURN = dict(max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 1024},
            system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            tools=[{"name": "read_file", "description": "read a file",
                    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
            messages=[{"role": "user", "content": "hello"}])


def test_baton_calls_vertex_as_anthropics_own_vertex_client_does(tmp_path):
    fake = vertex_fake("vx")
    fake.script(*["ok"] * 4)  # text answers, though tools are offered
    application_default(tmp_path, fake)
    gw = Baton(tmp_path, [vertex_provider(fake)])
    try:
        direct = anthropic.AnthropicVertex(region=REGION, project_id=PROJECT, access_token=TOKEN,
                                           base_url=fake.url + "/v1", max_retries=0)
        via = anthropic.Anthropic(base_url=gw.url, api_key=gw.key, max_retries=0)
        a = direct.messages.create(model=MODEL, **TURN)
        b = via.messages.create(model="claude-sonnet-4-5-20250929", **TURN)
        assert a.content[-1].text == b.content[-1].text == "vx: hello"
        sdk, baton = fake.stats(all=True)["headers"][:2]
        assert sdk["authorization"] == f"Bearer {TOKEN}"
        assert baton["authorization"].startswith("Bearer ya29.fake-vx-"), \
            "Baton's token came from the service account's exchange"
        first, second = fake.stats(all=True)["all"][:2]
        assert first == second, "the same body reached the model"

        with direct.messages.stream(model=MODEL, **TURN) as s:
            a_text = "".join(s.text_stream)
        with via.messages.stream(model="claude-sonnet-4-5", **TURN) as s:
            b_text = "".join(s.text_stream)
        assert a_text == b_text == "vx: hello"
    finally:
        gw.stop()
        fake.stop()
        os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)


def test_claude_code_goes_on_with_the_same_model_on_vertex_at_its_cap_and_comes_back(tmp_path):
    """One multi-turn task on Claude Code's own subscription hits the cap between turns: the
    rest runs on the same model on Vertex AI with a token Baton got for the service account of
    GOOGLE_APPLICATION_CREDENTIALS; after the reset the next task is the subscription's."""
    token = "sk-ant-oat01-fake-subscription-login-vertex-0001"
    home, work, sub, default = on_default_model(tmp_path, token)

    vx = vertex_fake("vx", default)
    application_default(tmp_path, vx)
    gw = Baton(tmp_path, [
        {"id": "claude-sub", "name": "Claude", "kind": "anthropic", "baseUrl": sub.url + "/v1",
         "credentials": "client", "models": ["*"], "priority": 1},
        vertex_provider(vx, models=[default], priority=2)])
    env = on_subscription(home, gw)
    try:
        script = work / "hello.py"
        sub.script("tool:Write:" + json.dumps({"file_path": str(script),
                                               "content": "print('HELLO FROM VERTEX')\n"}),
                   "claude-cap:10")
        vx.script("tool:Bash:" + json.dumps({"command": f"python3 {script}",
                                             "description": "run the script"}))
        result = claude_turn(work, env, "write hello.py, run it, and tell me what it printed",
                             "--allowedTools", "Write", "Bash", timeout=180)
        assert script.read_text() == "print('HELLO FROM VERTEX')\n", "Claude Code wrote it"
        assert result["num_turns"] >= 3, result
        assert result["result"].startswith("vx: "), result
        seen = vx.stats(all=True)
        last = seen["all"][-1]
        results = [b for m in last["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        assert results and "HELLO FROM VERTEX" in json.dumps(results[-1]), \
            "Claude Code ran Vertex's call and sent its output back"
        assert all(h["authorization"].startswith("Bearer ya29.fake-vx-") for h in seen["headers"])
        assert token not in json.dumps(seen), "the login stays with its own vendor"

        time.sleep(11)
        assert claude_turn(work, env, "say hi", timeout=180)["result"] == "claude: say hi"
        assert vx.stats()["hits"] == seen["hits"], "Vertex was not asked again"
    finally:
        gw.stop()
        sub.stop()
        vx.stop()
        os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
