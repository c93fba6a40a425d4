"""AWS Bedrock as a provider, against the real `baton serve` and a fake as strict as AWS (a SigV4
signature checked by the fake's own code, the body Bedrock takes, the account's model ids, its
event-stream framing). What Baton sends is compared with what Anthropic's own Bedrock client
sends (`anthropic.AnthropicBedrock`, signing with botocore), whose botocore also decodes the
fake's event stream; and the real Claude Code on its own subscription goes on with the same model
on Bedrock when the subscription hits its cap mid-task, and comes back at the reset."""
import json
import os
import time
from urllib.parse import unquote

import anthropic

from conftest import Baton, Fake
from test_claude_code import claude_turn, on_default_model, on_subscription

KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
REGION = "us-west-2"


def bedrock_fake(name, *models):
    return Fake(name, "--bedrock-keys", f"{KEY_ID}:{SECRET}", "--bedrock-region", REGION,
                "--bedrock-models", ",".join(models or (MODEL,)))


def bedrock_provider(fake, **extra):
    os.environ["BATON_TEST_BEDROCK_KEY"] = f"{KEY_ID}:{SECRET}"
    return {"id": "bk", "kind": "bedrock", "baseUrl": fake.url, "region": REGION,
            "models": [MODEL], "keys": [{"env": "BATON_TEST_BEDROCK_KEY"}], **extra}


TURN = dict(max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 1024},
            system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            tools=[{"name": "read_file", "description": "read a file",
                    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
            messages=[{"role": "user", "content": "hello"}],
            extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})


def same_but_version(sdk, baton):
    """The same body, but for `anthropic_version`: Anthropic's SDK sends the API version it was
    generated for, Baton the one AWS documents for Bedrock (`bedrock-2023-05-31`, the Messages
    API of `anthropic-version: 2023-06-01`, which Baton speaks to Anthropic too)."""
    a, b = json.loads(sdk), json.loads(baton)
    assert b.pop("anthropic_version") == "bedrock-2023-05-31"
    assert a.pop("anthropic_version")
    assert a == b, (a, b)
    return True


def test_baton_calls_bedrock_as_anthropics_own_bedrock_client_does(tmp_path):
    fake = bedrock_fake("bk")
    fake.script(*["ok"] * 4)  # text answers, though tools are offered
    gw = Baton(tmp_path, [bedrock_provider(fake)])
    try:
        direct = anthropic.AnthropicBedrock(aws_access_key=KEY_ID, aws_secret_key=SECRET,
                                            aws_region=REGION, base_url=fake.url, max_retries=0)
        a = direct.messages.create(model=MODEL, **TURN)
        via = anthropic.Anthropic(base_url=gw.url, api_key=gw.key, max_retries=0)
        # Claude Code's name for the model: the Bedrock id serves it.
        b = via.messages.create(model="claude-sonnet-4-5-20250929", **TURN)
        assert a.content[-1].text == b.content[-1].text == "bk: hello"
        assert [c.type for c in b.content] == ["thinking", "text"]
        sdk, baton = fake.stats()["bedrockCalls"]
        assert sdk["path"] == baton["path"] == f"/model/{MODEL}/invoke", (sdk["path"], baton["path"])
        assert same_but_version(sdk["body"], baton["body"])
        for h in (sdk["headers"], baton["headers"]):
            assert h["authorization"].startswith(
                f"AWS4-HMAC-SHA256 Credential={KEY_ID}/"), h["authorization"]
            assert f"/{REGION}/bedrock/aws4_request" in h["authorization"]
            assert "x-api-key" not in h and "anthropic-version" not in h, h
            assert h["content-type"].startswith("application/json"), h

        # Streamed: botocore reads the fake's frames, Baton turns them into the Messages API's
        # events, and the two texts agree.
        with direct.messages.stream(model=MODEL, **TURN) as s:
            a_text = "".join(s.text_stream)
        with via.messages.stream(model="claude-sonnet-4-5", **TURN) as s:
            b_text = "".join(s.text_stream)
            final = s.get_final_message()
        assert a_text == b_text == "bk: hello"
        assert final.content[0].type == "thinking" and final.content[0].signature
        calls = fake.stats()["bedrockCalls"]
        assert calls[2]["path"] == calls[3]["path"] == f"/model/{MODEL}/invoke-with-response-stream"
        assert same_but_version(calls[2]["body"], calls[3]["body"])
    finally:
        gw.stop()
        fake.stop()


def test_claude_code_goes_on_with_the_same_model_on_bedrock_at_its_cap_and_comes_back(tmp_path):
    """One multi-turn task (write a script, run it, report) on Claude Code's own subscription
    hits the cap between turns: the rest runs on the same model on Bedrock, signed with the AWS
    profile Baton finds (no key typed); the tool outputs go along; after the reset the next task
    is the subscription's again. Claude Code runs on its default model, whatever it is."""
    token = "sk-ant-oat01-fake-subscription-login-bedrock-0001"
    home, work, sub, default = on_default_model(tmp_path, token)
    bedrock_id = f"us.anthropic.{default}-v1:0"

    # The AWS profile of a shared credentials file, as the AWS tools leave it.
    creds = tmp_path / "aws-credentials"
    creds.write_text(f"[work]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n")
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
              "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):
        os.environ.pop(v, None)
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(creds)
    bk = bedrock_fake("bk", bedrock_id)
    gw = Baton(tmp_path, [
        {"id": "claude-sub", "name": "Claude", "kind": "anthropic", "baseUrl": sub.url + "/v1",
         "credentials": "client", "models": ["*"], "priority": 1},
        {"id": "bk", "kind": "bedrock", "baseUrl": bk.url, "region": REGION, "awsProfile": "work",
         "models": [bedrock_id], "priority": 2}])
    env = on_subscription(home, gw)
    try:
        script = work / "hello.py"
        sub.script("tool:Write:" + json.dumps({"file_path": str(script),
                                               "content": "print('HELLO FROM BEDROCK')\n"}),
                   "claude-cap:10")
        bk.script("tool:Bash:" + json.dumps({"command": f"python3 {script}",
                                             "description": "run the script"}))
        result = claude_turn(work, env, "write hello.py, run it, and tell me what it printed",
                             "--allowedTools", "Write", "Bash", timeout=180)
        assert script.read_text() == "print('HELLO FROM BEDROCK')\n", "Claude Code wrote it"
        assert result["num_turns"] >= 3, result
        assert result["result"].startswith("bk: "), result
        calls = bk.stats()["bedrockCalls"]
        assert calls and all(c["path"].startswith(f"/model/{bedrock_id}/") for c in calls), calls
        sent = json.loads(calls[-1]["body"])
        results = [b for m in sent["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        assert results and "HELLO FROM BEDROCK" in json.dumps(results[-1]), \
            "Claude Code ran Bedrock's call and sent its output back"
        assert token not in json.dumps(calls), "the login stays with its own vendor"
        assert all("AWS4-HMAC-SHA256" in c["headers"]["authorization"] for c in calls)

        # The cap's reset passes: the next task is back on the subscription.
        time.sleep(11)
        assert claude_turn(work, env, "say hi", timeout=180)["result"] == "claude: say hi"
        assert len(bk.stats()["bedrockCalls"]) == len(calls), "Bedrock was not asked again"
    finally:
        gw.stop()
        sub.stop()
        bk.stop()
        os.environ.pop("AWS_SHARED_CREDENTIALS_FILE", None)


LLAMA = "us.meta.llama3-3-70b-instruct-v1:0"
CONVERSE_TOOLS = [{"toolSpec": {"name": "read_file", "description": "read a file",
                                "inputSchema": {"json": {"type": "object",
                                                         "properties": {"path": {"type": "string"}},
                                                         "required": ["path"]}}}}]


def test_baton_calls_converse_as_boto3_does(tmp_path):
    """The same turn sent by boto3's own `converse` (botocore builds the body from AWS's service
    model and signs it) and by an OpenAI client through Baton to a `bedrock-converse` provider:
    the fake gets the same body at the same path, both signed for the region; streamed, botocore
    decodes the fake's event stream and the two texts agree."""
    import boto3
    import openai

    fake = bedrock_fake("bc", LLAMA)
    fake.script(*["ok"] * 4)  # text answers, though tools are offered
    os.environ["BATON_TEST_CONVERSE_KEY"] = f"{KEY_ID}:{SECRET}"
    gw = Baton(tmp_path, [{"id": "bc", "kind": "bedrock-converse", "baseUrl": fake.url,
                           "region": REGION, "models": [LLAMA],
                           "keys": [{"env": "BATON_TEST_CONVERSE_KEY"}]}])
    try:
        direct = boto3.client("bedrock-runtime", region_name=REGION, endpoint_url=fake.url,
                              aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
        turn = dict(modelId=LLAMA, system=[{"text": "Be brief."}],
                    messages=[{"role": "user", "content": [{"text": "hello"}]}],
                    inferenceConfig={"maxTokens": 300, "temperature": 0.5},
                    toolConfig={"tools": CONVERSE_TOOLS})
        a = direct.converse(**turn)
        via = openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
        chat = dict(model=LLAMA, max_tokens=300, temperature=0.5,
                    messages=[{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "hello"}],
                    tools=[{"type": "function", "function": {
                        "name": "read_file", "description": "read a file",
                        "parameters": CONVERSE_TOOLS[0]["toolSpec"]["inputSchema"]["json"]}}])
        b = via.chat.completions.create(**chat)
        assert a["output"]["message"]["content"][0]["text"] == "bc: hello"
        assert b.choices[0].message.content == "bc: hello"
        assert a["usage"]["outputTokens"] == b.usage.completion_tokens
        sdk, baton = fake.stats()["bedrockCalls"]
        # botocore escapes the id's `:` (`%3A`), Baton's URL does not need to: the same path.
        assert unquote(sdk["path"]) == unquote(baton["path"]) == f"/model/{LLAMA}/converse", \
            (sdk["path"], baton["path"])
        assert json.loads(sdk["body"]) == json.loads(baton["body"]), (sdk["body"], baton["body"])
        for h in (sdk["headers"], baton["headers"]):
            assert h["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
            assert f"/{REGION}/bedrock/aws4_request" in h["authorization"]

        # Streamed: botocore reads the fake's typed events; Baton turns them into Chat
        # Completions chunks.
        events = direct.converse_stream(**turn)["stream"]
        kinds, a_text = [], ""
        for e in events:
            kinds += list(e)
            a_text += e.get("contentBlockDelta", {}).get("delta", {}).get("text", "")
        assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"], kinds
        b_text = "".join(c.choices[0].delta.content or ""
                         for c in via.chat.completions.create(stream=True, **chat) if c.choices)
        assert a_text == b_text == "bc: hello"
        calls = fake.stats()["bedrockCalls"]
        assert unquote(calls[2]["path"]) == unquote(calls[3]["path"]) \
            == f"/model/{LLAMA}/converse-stream"
        assert json.loads(calls[2]["body"]) == json.loads(calls[3]["body"])
    finally:
        gw.stop()
        fake.stop()
