"""The real Codex (npm @openai/codex, pinned) on its default model, with Baton's key, doing a
multi-turn tool task through Baton to every upstream kind, over HTTP (a Baton provider in
Codex's config) and over its default WebSocket transport (`openai_base_url`).

Codex's default model declares its tools in an `additional_tools` input item, in namespaces,
with `exec` a freeform tool running JavaScript that calls the others. The task: write hello.py
(`exec` → `apply_patch`), run it (`exec` → `exec_command`), change it, run it again, report.
Codex exits 0 even when every tool call was aborted, so each test asserts what the task
produced: the file with the right content, every tool output the upstream got back carrying
what the tool did (never "aborted"), and no payload complaint on Codex's stderr."""
import json
import os
import pathlib
import subprocess

import pytest

from conftest import KINDS, Baton, Fake, tool_outputs

CODEX = os.environ.get("CODEX_BIN") or str(
    pathlib.Path.home() / ".cache/baton-npm/node_modules/.bin/codex")

TROUBLE = ("incompatible payload", "unsupported call", "Reconnecting", "Falling back from WebSockets",
           "failed to connect to Responses WebSocket", "stream disconnected")


def need_codex():
    if not os.path.exists(CODEX):
        if os.environ.get("CI"):
            pytest.fail(f"Codex is not installed at {CODEX}; .ci/run installs it")
        pytest.skip("Codex not installed (scripts/test installs it)")


def patch(body):
    """`exec` input that edits files through Codex's apply_patch."""
    patch = f"*** Begin Patch\n{body}*** End Patch\n"
    return f"const r = await tools.apply_patch({json.dumps(patch)}); text(JSON.stringify(r));"


WRITE = patch("*** Add File: hello.py\n+print('FIRST')\n")
CHANGE = patch("*** Update File: hello.py\n@@\n-print('FIRST')\n+print('SECOND')\n")


RUN = ("const r = await tools.exec_command({cmd: 'python3 hello.py'});"
       " text(typeof r === 'string' ? r : JSON.stringify(r));")


def exec_call(script):
    return "tool:exec:" + json.dumps({"input": script})


def task_script():
    """What the fake model does, turn by turn: write, run, change, run again; then answer."""
    return [exec_call(WRITE), exec_call(RUN), exec_call(CHANGE), exec_call(RUN)]


def codex_env(tmp_path):
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home / ".codex"),
           "RUST_LOG": "codex_api=info"}
    return home, work, env


def run_codex(work, env, *args):
    out = subprocess.run([CODEX, "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access",
                          *args], cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    for trouble in TROUBLE:
        assert trouble not in out.stderr, out.stderr
    return out


def one_provider(tmp_path, kind):
    """A fake upstream of `kind` and Baton in front of it with a key of Baton's, serving Codex's
    models there."""
    up = Fake("up")
    os.environ["BATON_TEST_CODEX_UP_KEY"] = "sk-codex-default-up-key-0000000000"
    gw = Baton(tmp_path, [{"id": "up", "kind": kind, "baseUrl": up.url + KINDS[kind],
                           "models": ["up-model"], "keys": [{"env": "BATON_TEST_CODEX_UP_KEY"}]}],
               model_map={"gpt-*": "auto"})
    return up, gw


def transport_args(transport, gw, home, env):
    """Codex pointed at Baton with Baton's key: over HTTP through the provider `baton connect
    codex` writes, or over the WebSocket of its built-in OpenAI provider."""
    if transport == "http":
        from conftest import baton_connect
        said = baton_connect(gw, home, "codex", env={"CODEX_HOME": env["CODEX_HOME"]})
        assert "own login" not in said, said
        return []
    login = subprocess.run([CODEX, "login", "--with-api-key"], input=gw.key, env=env,
                           capture_output=True, text=True, timeout=60)
    assert login.returncode == 0, login.stdout + login.stderr
    return ["-c", f'openai_base_url="{gw.base_url}"']


@pytest.mark.parametrize("transport", ["http", "websocket"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_codex_default_model_does_a_tool_task_on_every_kind(tmp_path, kind, transport):
    need_codex()
    up, gw = one_provider(tmp_path, kind)
    home, work, env = codex_env(tmp_path)
    try:
        extra = transport_args(transport, gw, home, env)
        up.script(*task_script())
        out = run_codex(work, env, *extra, "write hello.py, run it, rewrite it, run it again")
        assert (work / "hello.py").read_text() == "print('SECOND')\n", out.stdout + out.stderr
        assert "up: " in out.stdout, out.stdout
        stats = up.stats()
        outputs = tool_outputs(kind, stats["last"])
        assert len(outputs) == 4, outputs
        assert not any("aborted" in o for o in outputs), outputs
        assert "FIRST" in outputs[1] and "SECOND" in outputs[3], outputs
        if transport == "websocket":
            assert "successfully connected to Responses WebSocket" in out.stderr, out.stderr
        else:
            assert "Responses WebSocket" not in out.stderr, out.stderr
        if kind == "openai-responses":
            sent = stats["last"]
            # Codex's own request, not a translation: its reasoning and cache key went on, and
            # `exec` stayed freeform.
            assert sent["prompt_cache_key"] and sent["reasoning"] and sent["include"], sent.keys()
            names = {t["name"]: t["type"] for ns in sent["tools"] for t in ns.get("tools", [ns])}
            assert names["exec"] == "custom", names
    finally:
        gw.stop()
        up.stop()


@pytest.mark.parametrize("transport", ["http", "websocket"])
def test_codex_default_model_fails_over_through_every_kind_and_comes_back(tmp_path, transport):
    """One Codex task whose turns each meet a rate limit on the provider that served the last
    one: the Responses provider writes the file, then is limited for a while; Chat Completions
    runs it, Anthropic changes it, Gemini runs it again, each limited after its turn. The
    conversation (Codex's freeform `exec` calls and their outputs) goes from API to API intact,
    no call is aborted; once the first provider's limit has passed, the next task is its again."""
    need_codex()
    fakes = {kind: Fake(kind.split("-")[0]) for kind in KINDS}
    os.environ["BATON_TEST_CODEX_UP_KEY"] = "sk-codex-default-up-key-0000000000"
    providers = [{"id": kind, "kind": kind, "baseUrl": fakes[kind].url + KINDS[kind],
                  "models": ["up-model"], "keys": [{"env": "BATON_TEST_CODEX_UP_KEY"}],
                  "priority": n + 1} for n, kind in enumerate(KINDS)]
    gw = Baton(tmp_path, providers, model_map={"gpt-*": "auto"})
    home, work, env = codex_env(tmp_path)
    try:
        extra = transport_args(transport, gw, home, env)
        # Each provider serves one turn, then is rate-limited: the first for 15 s (the rest
        # of the task is well inside that), the others for an hour.
        fakes["openai-responses"].script(exec_call(WRITE), "429:15")
        fakes["openai-compatible"].script(exec_call(RUN), "429:3600")
        fakes["anthropic"].script(exec_call(CHANGE), "429:3600")
        fakes["gemini"].script(exec_call(RUN))
        out = run_codex(work, env, *extra, "write hello.py, run it, rewrite it, run it again")
        assert (work / "hello.py").read_text() == "print('SECOND')\n", out.stdout + out.stderr
        assert "gemini: " in out.stdout, out.stdout
        outputs = tool_outputs("gemini", fakes["gemini"].stats()["last"])
        assert len(outputs) == 4, outputs
        assert not any("aborted" in o for o in outputs), outputs
        assert "FIRST" in outputs[1] and "SECOND" in outputs[3], outputs
        # Each kind got the conversation so far in its own API, the earlier calls translated
        # (its last request is the turn after its own, the one it refused).
        for kind, n in (("openai-compatible", 2), ("anthropic", 3)):
            outs = tool_outputs(kind, fakes[kind].stats()["last"])
            assert len(outs) == n and not any("aborted" in o for o in outs), (kind, outs)
        # The first provider's limit passes: the next task is served there, as Codex sent it.
        hits = fakes["openai-responses"].stats()["hits"]
        import time
        time.sleep(16)
        fakes["openai-responses"].script("ok")
        out = run_codex(work, env, *extra, "say hi")
        assert "openai: " in out.stdout, out.stdout + out.stderr
        assert fakes["openai-responses"].stats()["hits"] == hits + 1
    finally:
        gw.stop()
        for f in fakes.values():
            f.stop()


@pytest.mark.parametrize("transport", ["http", "websocket"])
@pytest.mark.parametrize("kind", ["openai-responses", "anthropic"])
def test_codex_default_model_goes_on_after_compacting(tmp_path, kind, transport):
    """Codex compacts (a tiny `model_auto_compact_token_limit`: before every turn) by sending
    the conversation with a `compaction_trigger` item and wants exactly one `compaction` item
    back, then sends it in place of the history. A Responses upstream makes that item itself
    (the strict fake seals it as its own and refuses any other); to Claude, Baton asks for a
    summary and makes the item, and the summary goes on in the next turns. The task completes
    either way, with no compaction error. (Over HTTP Codex compacts by itself: the task still
    completes.)"""
    need_codex()
    up, gw = one_provider(tmp_path, kind)
    home, work, env = codex_env(tmp_path)
    try:
        extra = transport_args(transport, gw, home, env)
        steps = task_script()
        if kind != "openai-responses":
            # The model answers each compaction with its summary.
            steps = [s for n, step in enumerate(steps)
                     for s in (step, f"text:Summary {n}: hello.py is being written and run.")]
        up.script(*steps, "text:up: all done")
        out = run_codex(work, env, *extra, "-c", "model_auto_compact_token_limit=10",
                        "write hello.py, run it, rewrite it, run it again")
        assert (work / "hello.py").read_text() == "print('SECOND')\n", out.stdout + out.stderr
        assert "Error running remote compact task" not in out.stderr, out.stderr
        bodies = up.stats(all=True)["all"]
        if kind == "openai-responses":
            triggers = [b for b in bodies if b["input"][-1].get("type") == "compaction_trigger"]
            carried = [b for b in bodies if any(i.get("type") == "compaction" for i in b["input"])]
        else:
            text = [json.dumps(b["messages"]) for b in bodies]
            triggers = [t for t in text if "Your context is about to be compacted" in t]
            carried = [t for t in text if "Summary of the conversation so far" in t]
        # Over HTTP (a provider of Baton's in Codex's config) Codex compacts on its own, with an
        # ordinary request; on its built-in OpenAI provider it asks the server.
        if transport == "websocket":
            assert triggers and carried, (len(triggers), len(carried))
    finally:
        gw.stop()
        up.stop()
