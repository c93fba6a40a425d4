"""The real Codex CLI (npm @openai/codex) as a client of Baton's Responses API, on a (fake)
ChatGPT login: its own login goes through Baton to the `credentials: "client"` provider, which
takes nothing else; at the subscription's cap the next provider answers."""
import base64
import json
import os
import pathlib
import subprocess
import time

import pytest

CODEX = os.environ.get("CODEX_BIN") or str(
    pathlib.Path.home() / ".cache/baton-npm/node_modules/.bin/codex")



def anthropic_results(sent):
    """The tool results a Messages request carries, as text, in order: `tool_result` blocks, or
    the final exchange written as text (Baton closes it so Claude keeps thinking)."""
    out = []
    for m in sent["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_result":
                out.append(json.dumps(b))
            elif b.get("type") == "text" and b["text"].startswith("(The `"):
                out.append(b["text"])
    return out

def jwt(claims):
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def chatgpt_login(codex_home):
    """A ChatGPT login as `codex login` leaves it (tokens are JWT-shaped; never valid anywhere)."""
    claims = {"iss": "https://auth.openai.com", "exp": 4102444800, "iat": int(time.time()),
              "email": "dev@example.com",
              "https://api.openai.com/auth": {"chatgpt_account_id": "acct-fake-123",
                                              "chatgpt_plan_type": "plus"}}
    access = jwt(dict(claims, scp=["openid", "profile", "email", "offline_access"]))
    (codex_home / "auth.json").write_text(json.dumps({
        "OPENAI_API_KEY": None, "last_refresh": "2026-12-01T23:00:00Z",
        "tokens": {"id_token": jwt(claims), "access_token": access, "refresh_token": "rt-fake",
                   "account_id": "acct-fake-123"}}))
    return access


def connect(tmp_path, home, codex_home, gw):
    """Codex pointed at Baton on its own ChatGPT login by `baton connect codex` (which picks
    the login because a passthrough provider serves Codex): the working directory and the
    environment to run it in, with no variable that says where Baton is or its key."""
    from conftest import baton_connect
    said = baton_connect(gw, home, "codex", env={"CODEX_HOME": str(codex_home)})
    assert "own login" in said, said
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(codex_home)}
    return work, env


def codex_exec(work, env, prompt, *extra, timeout=120):
    """One `codex exec` turn: it must succeed, with no complaint about the models Baton lists."""
    # No sandbox: Codex's own sandbox helper cannot be installed under /tmp.
    out = subprocess.run([CODEX, "exec", "--skip-git-repo-check", "--sandbox",
                          "danger-full-access", *extra, prompt], cwd=work, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    for complaint in ("failed to decode models", "failed to refresh available models",
                      "Model metadata for"):
        assert complaint not in out.stderr, out.stderr
    return out.stdout


PATCH = "*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch\n"


def test_codex_on_its_own_chatgpt_login_then_failover_at_the_cap(tmp_path):
    """A whole Codex session on the subscription: a plain answer; the backend's own model list
    reaching Codex through Baton (so Codex offers that model's classic tools), a shell function
    call and an `apply_patch` freeform call that Codex runs; then the cap, and the next turn
    served by an Anthropic provider, Codex's freeform `exec` tool translated there and back, the
    patch applied; later turns go straight to the fallback; the login appears nowhere."""
    from conftest import Baton, EventTap, Fake, admin_state
    if not os.path.exists(CODEX):
        if os.environ.get("CI"):
            pytest.fail(f"Codex is not installed at {CODEX}; .ci/run installs it")
        pytest.skip("Codex not installed (scripts/test installs it)")
    home = tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    access = chatgpt_login(codex_home)
    sub = Fake("chatgpt", "--subscription", access)
    other = Fake("claude")
    gw = Baton(tmp_path, [
        {"id": "chatgpt", "name": "ChatGPT", "kind": "chatgpt", "baseUrl": sub.url + "/v1",
         "credentials": "client", "models": ["*"], "priority": 1},
        {"id": "claude", "kind": "anthropic", "baseUrl": other.url + "/v1",
         "models": ["claude-real-model"], "priority": 2}], model_map={"gpt-*": "auto"})
    tap = EventTap(gw)
    work, env = connect(tmp_path, home, codex_home, gw)

    def ask(prompt, *extra):
        return codex_exec(work, env, prompt, *extra)

    def sent_items(fake, kind):
        return [i for i in fake.stats()["last"].get("input", []) if i.get("type") == kind]

    try:
        # Codex's own model name goes to the subscription unchanged, its request passed through.
        assert "chatgpt: say hi" in ask("say hi"), "the subscription answered (it takes only that login)"
        sent = sub.stats()["last"]
        assert sent["store"] is False

        # The backend's model list reached Codex: its model (the fake's `gpt-chatgpt-codex`, with
        # the classic tools) is one Codex knows, without a warning, and offers the tools of.
        sub.script('tool:exec_command:{"cmd": "echo SHELL_OK"}')
        ask("run the shell", "-m", "gpt-chatgpt-codex")
        tools = {t.get("name"): t.get("type") for t in sub.stats()["last"]["tools"]}
        assert tools.get("exec_command") == "function" and tools.get("apply_patch") == "custom", tools
        outputs = sent_items(sub, "function_call_output")
        assert outputs and "SHELL_OK" in json.dumps(outputs[-1]), "Codex ran the shell call"

        patch = PATCH.format(name="sub.txt", text="from the subscription")
        sub.script("tool:apply_patch:" + json.dumps({"input": patch}))
        ask("patch it", "-m", "gpt-chatgpt-codex")
        assert (work / "sub.txt").read_text() == "from the subscription\n"
        assert sent_items(sub, "custom_tool_call_output"), "the patch result went back"
        hits = sub.stats()["hits"]

        # The cap: the turn goes to Anthropic. Codex's own default model has its tools in the
        # input, in namespaces, its freeform `exec` running JavaScript that calls the others: `exec`
        # travels as a function there, and its call comes back as Codex's freeform call.
        sub.script("usage-limit")
        patch = PATCH.format(name="fallback.txt", text="from the fallback")
        script = f"await tools.apply_patch({json.dumps(patch)}); text('patched');"
        other.script("tool:exec:" + json.dumps({"input": script}))
        ask("patch it again")
        assert (work / "fallback.txt").read_text() == "from the fallback\n", "Codex applied it"
        sent = other.stats()["last"]
        assert sent["model"] == "claude-real-model"
        exec_tool = next(t for t in sent["tools"] if t["name"] == "exec")
        assert exec_tool["input_schema"]["required"] == ["input"]
        results = anthropic_results(sent)
        assert results and "patched" in results[-1], "the tool's output went back"
        assert sub.stats()["hits"] == hits + 1, "the capped account was asked once"

        # While the cap lasts, Codex's turns go straight to the fallback.
        assert "claude: say hi" in ask("say hi")
        assert sub.stats()["hits"] == hits + 1
        failovers = tap.of("failover")
        assert len(failovers) == 1, failovers
        assert "subscription limit reached" in failovers[0]["message"], failovers[0]
        assert access not in admin_state(gw)
    finally:
        gw.stop()
        sub.stop()
        other.stop()
    log = gw.proc.stderr.read()
    assert "chatgpt" in log and access not in log, "the login is never logged"


def test_codex_task_fails_over_mid_task_to_anthropic_and_back(tmp_path):
    """One multi-turn Codex task (write a script with apply_patch, run it, report) that hits the
    ChatGPT cap between its turns: the rest is served by an Anthropic provider, which runs the
    script through Codex's shell function; once the cap's reset has passed, the next task is
    back on the subscription."""
    from conftest import Baton, Fake
    if not os.path.exists(CODEX):
        if os.environ.get("CI"):
            pytest.fail(f"Codex is not installed at {CODEX}; .ci/run installs it")
        pytest.skip("Codex not installed (scripts/test installs it)")
    home = tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    access = chatgpt_login(codex_home)
    sub = Fake("chatgpt", "--subscription", access)
    other = Fake("claude")
    os.environ["BATON_TEST_CLAUDE_KEY"] = "sk-ant-api03-test-mid-task-key-000000"
    gw = Baton(tmp_path, [
        {"id": "chatgpt", "name": "ChatGPT", "kind": "chatgpt", "baseUrl": sub.url + "/v1",
         "credentials": "client", "models": ["*"], "priority": 1},
        {"id": "claude", "kind": "anthropic", "baseUrl": other.url + "/v1",
         "models": ["claude-real-model"], "keys": [{"env": "BATON_TEST_CLAUDE_KEY"}], "priority": 2}],
        model_map={"gpt-*": "auto"})
    work, env = connect(tmp_path, home, codex_home, gw)

    def ask(prompt):
        return codex_exec(work, env, prompt, "-m", "gpt-chatgpt-codex", timeout=180)

    try:
        # Turn 1 on the subscription writes the script; turn 2 finds the cap, back in 8 s.
        patch = PATCH.format(name="hello.py", text="print('HELLO FROM CODEX')")
        sub.script("tool:apply_patch:" + json.dumps({"input": patch}), "usage-limit:8")
        # The Anthropic provider runs it with Codex's shell function, then reports.
        other.script("tool:exec_command:" + json.dumps({"cmd": "python3 hello.py"}))
        out = ask("write hello.py, run it, and tell me what it printed")
        assert (work / "hello.py").read_text() == "print('HELLO FROM CODEX')\n", "Codex patched"
        assert "claude: " in out, out
        sent = other.stats()["last"]
        assert sent["model"] == "claude-real-model"
        results = anthropic_results(sent)
        assert results and "HELLO FROM CODEX" in results[-1], \
            "Codex ran Anthropic's call and the output went back"
        uses = [b["name"] for m in sent["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_use"]
        assert "apply_patch" in uses, "the subscription's earlier tool turn went along, translated"
        assert access not in json.dumps(sent), "the ChatGPT login stays with its own vendor"

        # The cap's reset passes: the next task is back on the subscription.
        time.sleep(9)
        assert "chatgpt: say hi" in ask("say hi")
    finally:
        gw.stop()
        sub.stop()
        other.stop()
