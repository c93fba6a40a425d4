"""The real Claude Code CLI (npm @anthropic-ai/claude-code) pointed at Baton with
ANTHROPIC_BASE_URL, served by fake OpenAI-compatible upstreams."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

CLAUDE = os.environ.get("CLAUDE_BIN") or str(
    pathlib.Path.home() / ".cache/baton-npm/node_modules/.bin/claude")


def logged_in(tmp_path, token):
    """A HOME where Claude Code is logged in to a (fake) subscription, and a working folder."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {
        "accessToken": token, "refreshToken": "sk-ant-ort01-fake", "expiresAt": 4102444800000,
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}}))
    work = tmp_path / "work"
    work.mkdir()
    return home, work


def on_subscription(home, gw):
    """Claude Code on its own login through Baton, set up by `baton connect claude-code` (the
    login is chosen because a passthrough provider serves Claude Code): its settings.json
    carries the address and Baton's key in a header of its own; nothing in the environment."""
    from conftest import baton_connect
    said = baton_connect(gw, home, "claude-code")
    assert "own login" in said, said
    return {
        "PATH": os.environ["PATH"], "HOME": str(home),
        "CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def need_claude():
    if not os.path.exists(CLAUDE):
        if os.environ.get("CI"):
            pytest.fail(f"Claude Code is not installed at {CLAUDE}; .ci/run installs it")
        pytest.skip("Claude Code not installed (scripts/test installs it)")


def on_default_model(tmp_path, token):
    """Claude Code logged in to a (fake) subscription, that subscription's fake, and the model
    Claude Code asks for by default, found by one turn through a Baton with the subscription
    alone: a test then sets up the same model elsewhere, whatever the newest release's default."""
    from conftest import Baton, Fake
    need_claude()
    home, work = logged_in(tmp_path, token)
    sub = Fake("claude", "--subscription", token)
    (tmp_path / "probe").mkdir()
    probe = Baton(tmp_path / "probe", [
        {"id": "claude-sub", "name": "Claude", "kind": "anthropic", "baseUrl": sub.url + "/v1",
         "credentials": "client", "models": ["*"], "priority": 1}])
    try:
        claude_turn(work, on_subscription(home, probe), "say hi", timeout=180)
        return home, work, sub, sub.stats()["last"]["model"]
    finally:
        probe.stop()


def claude_turn(work, env, prompt, *extra, timeout=120):
    """One `claude -p` task in JSON: it must succeed; its result object."""
    out = subprocess.run([CLAUDE, "-p", prompt, "--output-format", "json", *extra], cwd=work,
                         env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["is_error"] is False, result
    return result


def claude(gateway, tmp_path, prompt, model=None, extra_env=None):
    if not os.path.exists(CLAUDE):
        if os.environ.get("CI"):
            pytest.fail(f"Claude Code is not installed at {CLAUDE}; .ci/run installs it")
        pytest.skip("Claude Code not installed (scripts/test installs it)")
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ["PATH"], "HOME": str(home),
        "ANTHROPIC_BASE_URL": gateway.url, "ANTHROPIC_API_KEY": gateway.key,
        "CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    env.update(extra_env or {})
    args = [CLAUDE, "-p", prompt, "--output-format", "json"] + (["--model", model] if model else [])
    out = subprocess.run(args, cwd=work, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout), work


def test_claude_code_gets_the_upstream_answer(gateway, tmp_path):
    result, _ = claude(gateway, tmp_path, "say hi")
    assert result["is_error"] is False
    assert result["result"] == "a: say hi"
    sent = gateway.a.stats()["last"]
    assert sent["model"] == "a-model"
    assert sent["messages"][0]["role"] == "system", "Claude Code's system prompt became a system message"
    assert sent["tools"] == [] or all(t["type"] == "function" for t in sent["tools"])
    for anthropic_only in ("metadata", "thinking", "context_management"):
        assert anthropic_only not in sent, f"{anthropic_only} is not sent to an OpenAI server"


def test_claude_code_tool_turn_translates_both_ways(gateway, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "note.txt").write_text("the secret word is baton\n")
    args = json.dumps({"file_path": str(work / "note.txt")})
    gateway.a.script(f"tool:Read:{args}")
    result, _ = claude(gateway, tmp_path, "read note.txt")
    assert result["is_error"] is False, result
    assert result["num_turns"] >= 2, "Claude Code ran the tool and asked again"
    sent = gateway.a.stats()["last"]
    tool_msgs = [m for m in sent["messages"] if m["role"] == "tool"]
    assert tool_msgs, "the tool result reached the upstream as an OpenAI tool message"
    assert "the secret word is baton" in json.dumps(tool_msgs[-1]["content"])
    calls = [m for m in sent["messages"] if m.get("tool_calls")]
    assert calls[-1]["tool_calls"][0]["function"]["name"] == "Read"


def test_claude_code_survives_a_429(gateway, tmp_path):
    gateway.a.script("429")
    result, _ = claude(gateway, tmp_path, "say hi")
    assert result["is_error"] is False
    assert result["result"] == "b: say hi"


def test_claude_code_through_an_anthropic_upstream(tmp_path):
    """Anthropic in, Anthropic out: Claude Code's request reaches the Messages upstream with its
    own fields (thinking, metadata, betas) intact."""
    from conftest import Baton, Fake
    up = Fake("claude")
    gw = Baton(tmp_path, [{"id": "anthropic", "kind": "anthropic", "baseUrl": up.url + "/v1",
                           "models": ["claude-real-model"]}])
    try:
        result, _ = claude(gw, tmp_path, "say hi")
        assert result["is_error"] is False, result
        assert result["result"] == "claude: say hi"
        sent = up.stats()["last"]
        assert sent["model"] == "claude-real-model"
        assert "metadata" in sent, "Claude Code's own fields pass through to an Anthropic upstream"
        assert isinstance(sent["system"], list), "system blocks (with cache_control) unchanged"
    finally:
        gw.stop()
        up.stop()


def test_claude_code_on_its_own_subscription_then_failover_at_the_cap(tmp_path):
    """Claude Code logged in with a (fake) subscription: its own login goes through Baton to the
    subscription provider, which takes nothing else, for a plain answer and a tool turn; at the
    cap (Anthropic's own 429, unified status rejected) the next provider, OpenAI-compatible,
    answers, a tool turn translated both ways; one failover event; while the cap lasts Claude
    Code's requests skip the capped account; the login appears nowhere."""
    from conftest import Baton, EventTap, Fake, admin_state
    if not os.path.exists(CLAUDE):
        if os.environ.get("CI"):
            pytest.fail(f"Claude Code is not installed at {CLAUDE}; .ci/run installs it")
        pytest.skip("Claude Code not installed (scripts/test installs it)")
    token = "sk-ant-oat01-fake-subscription-login-0123456789"
    sub = Fake("claude", "--subscription", token)
    other = Fake("b")
    gw = Baton(tmp_path, [
        {"id": "claude-sub", "name": "Claude", "kind": "anthropic",
         "baseUrl": sub.url + "/v1", "credentials": "client", "models": ["*"], "priority": 1},
        {"id": "b", "kind": "openai-compatible", "baseUrl": other.url + "/v1", "models": ["b-model"],
         "priority": 2}])
    tap = EventTap(gw)
    home, work = logged_in(tmp_path, token)
    (work / "note.txt").write_text("the secret word is baton\n")
    read_note = "tool:Read:" + json.dumps({"file_path": str(work / "note.txt")})
    env = on_subscription(home, gw)

    def ask(prompt):
        return claude_turn(work, env, prompt)

    try:
        result = ask("say hi")
        assert result["result"] == "claude: say hi", "the subscription answered (it takes only that login)"

        # A tool turn on the subscription: Claude Code reads the file and sends the result back.
        sub.script(read_note)
        result = ask("read note.txt")
        assert result["num_turns"] >= 2, "Claude Code ran the tool and asked again"
        sent = sub.stats()["last"]
        results = [b for m in sent["messages"] if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        assert results and "the secret word is baton" in json.dumps(results[-1])
        hits = sub.stats()["hits"]

        # The cap: the OpenAI-compatible provider serves the turn, its tool call translated to
        # Claude Code's tool_use and the result back to an OpenAI tool message.
        sub.script("claude-cap")
        other.script(read_note)
        result = ask("read note.txt again")
        assert result["num_turns"] >= 2, result
        assert result["result"].startswith("b: "), result
        sent = other.stats()["last"]
        tool_msgs = [m for m in sent["messages"] if m["role"] == "tool"]
        assert tool_msgs and "the secret word is baton" in json.dumps(tool_msgs[-1]["content"])
        calls = [m for m in sent["messages"] if m.get("tool_calls")]
        assert calls[-1]["tool_calls"][0]["function"]["name"] == "Read"
        assert sub.stats()["hits"] == hits + 1, "the capped account was asked once"

        # While the cap lasts, Claude Code's requests go straight to the next provider.
        assert ask("say hi")["result"] == "b: say hi"
        assert sub.stats()["hits"] == hits + 1
        failovers = tap.of("failover")
        assert len(failovers) == 1, failovers
        assert failovers[0]["message"].startswith("Claude subscription limit reached — back at"), \
            failovers[0]
        assert failovers[0]["reset_at_ms"], "cools until the reset Anthropic stated"
        assert token not in admin_state(gw)
    finally:
        gw.stop()
        sub.stop()
        other.stop()
    log = gw.proc.stderr.read()
    assert "claude-sub" in log and token not in log, "the login is never logged"


def test_claude_code_thinking_survives_a_failover_between_anthropic_accounts(tmp_path):
    """Claude Code thinks (MAX_THINKING_TOKENS: thinking enabled, its signed blocks sent back in
    the tool loop); the first account signs its thinking, then caps mid tool loop; the second
    refuses any signature but its own, as the real API does. Baton leaves the first one's
    thinking out and writes that tool exchange as text (thinking stays on: a turn that begins
    without thinking may not be continued with it on), and the turn completes there. Both serve the model Claude Code asked for: Claude Code itself drops
    thinking that another model signed."""
    from conftest import Baton, Fake
    if not os.path.exists(CLAUDE):
        if os.environ.get("CI"):
            pytest.fail(f"Claude Code is not installed at {CLAUDE}; .ci/run installs it")
        pytest.skip("Claude Code not installed (scripts/test installs it)")
    a, b = Fake("a"), Fake("b")
    model = "claude-sonnet-4-5"
    gw = Baton(tmp_path, [
        {"id": "a", "kind": "anthropic", "baseUrl": a.url + "/v1", "models": [model], "priority": 1},
        {"id": "b", "kind": "anthropic", "baseUrl": b.url + "/v1", "models": [model], "priority": 2}])
    try:
        work = tmp_path / "work"
        work.mkdir()
        (work / "note.txt").write_text("the secret word is baton\n")
        a.script("tool:Read:" + json.dumps({"file_path": str(work / "note.txt")}), "claude-cap")
        b.script("ok")  # b answers (the exchange it got as text reads as the user's words)
        result, _ = claude(gw, tmp_path, "read note.txt", model=model,
                           extra_env={"MAX_THINKING_TOKENS": "4000"})
        assert result["is_error"] is False, result
        assert result["num_turns"] >= 2 and result["result"].startswith("b: "), result
        assert a.stats()["hits"] == 2 and b.stats()["hits"] == 1, "b took the turn at once"
        sent_to_a = json.dumps(a.stats()["last"]["messages"])
        assert "a thinks." in sent_to_a, "Claude Code sent a's thinking back (to a, which capped)"
        sent = b.stats()["last"]
        assert "a thinks." not in json.dumps(sent["messages"]), "a's signed thinking never reached b"
        assert sent["thinking"]["type"] == "enabled", "thinking stays on"
        assert "(The `Read` tool returned:" in json.dumps(sent["messages"][-1]), \
            "the exchange that lost its thinking went as text"
        assert "the secret word is baton" in json.dumps(sent["messages"]), "the tool result did"
    finally:
        gw.stop()
        a.stop()
        b.stop()


def test_claude_code_task_fails_over_mid_task_to_a_responses_provider_and_back(tmp_path):
    """One multi-turn task (write a script, run it, report) that hits the subscription's cap
    between its turns: the rest of the task is served by an `openai-responses` provider (Codex's
    kind), its tool calls translated both ways and run by Claude Code; once the cap's reset
    has passed, the next task is back on the subscription."""
    from conftest import Baton, Fake
    if not os.path.exists(CLAUDE):
        if os.environ.get("CI"):
            pytest.fail(f"Claude Code is not installed at {CLAUDE}; .ci/run installs it")
        pytest.skip("Claude Code not installed (scripts/test installs it)")
    token = "sk-ant-oat01-fake-subscription-login-mid-task-0001"
    sub = Fake("claude", "--subscription", token)
    other = Fake("resp")
    os.environ["BATON_TEST_RESP_KEY"] = "sk-proj-test-responses-key-00000000"
    gw = Baton(tmp_path, [
        {"id": "claude-sub", "name": "Claude", "kind": "anthropic",
         "baseUrl": sub.url + "/v1", "credentials": "client", "models": ["*"], "priority": 1},
        {"id": "resp", "kind": "openai-responses", "baseUrl": other.url + "/v1",
         "models": ["resp-model"], "keys": [{"env": "BATON_TEST_RESP_KEY"}], "priority": 2}])
    home, work = logged_in(tmp_path, token)
    env = on_subscription(home, gw)

    def ask(prompt):
        return claude_turn(work, env, prompt, "--allowedTools", "Write", "Bash", timeout=180)

    try:
        script = work / "hello.py"
        # Turn 1 on the subscription writes the script; turn 2 finds the cap, back in 8 s (longer
        # than routing.shortWaitMs, so Baton fails over rather than waiting).
        sub.script("tool:Write:" + json.dumps({"file_path": str(script),
                                               "content": "print('HELLO FROM THE TASK')\n"}),
                   "claude-cap:8")
        # The Responses provider runs it, then reports.
        other.script("tool:Bash:" + json.dumps({"command": f"python3 {script}",
                                                "description": "run the script"}))
        result = ask("write hello.py, run it, and tell me what it printed")
        assert script.read_text() == "print('HELLO FROM THE TASK')\n", "Claude Code wrote it"
        assert result["num_turns"] >= 3, result
        assert result["result"].startswith("resp: "), result
        sent = other.stats()["last"]
        outputs = [i for i in sent["input"] if i.get("type") == "function_call_output"]
        assert outputs and "HELLO FROM THE TASK" in json.dumps(outputs[-1]), \
            "Claude Code ran the Responses provider's call and sent its output back"
        writes = [i for i in sent["input"] if i.get("type") == "function_call"
                  and i.get("name") == "Write"]
        assert writes, "the subscription's earlier tool turn went along, translated"
        assert token not in json.dumps(sent), "the login stays with its own vendor"

        # The cap's reset passes: the next task is back on the subscription.
        import time
        time.sleep(9)
        assert ask("say hi")["result"] == "claude: say hi"
    finally:
        gw.stop()
        sub.stop()
        other.stop()
