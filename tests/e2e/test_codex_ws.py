"""The real Codex (npm @openai/codex, pinned) on its default transport: its own OpenAI provider
pointed at Baton (`openai_base_url`) opens a WebSocket to `/v1/responses` first. Baton serves it:
a multi-turn tool task on a translated route (Anthropic upstream), a rate limit on the first
provider failed over inside a WebSocket turn, and no reconnect or fallback to HTTP."""
import json
import os
import pathlib
import sqlite3
import subprocess

import pytest

CODEX = os.environ.get("CODEX_BIN") or str(
    pathlib.Path.home() / ".cache/baton-npm/node_modules/.bin/codex")


def test_codex_default_websocket_transport_runs_a_tool_task_with_failover(tmp_path):
    from conftest import Baton, Fake
    if not os.path.exists(CODEX):
        if os.environ.get("CI"):
            pytest.fail(f"Codex is not installed at {CODEX}; .ci/run installs it")
        pytest.skip("Codex not installed (scripts/test installs it)")
    limited = Fake("groq")
    claude = Fake("claude")
    os.environ["BATON_TEST_WS_GROQ_KEY"] = "gsk-ws-test-key"
    os.environ["BATON_TEST_WS_CLAUDE_KEY"] = "sk-ant-api03-ws-test-key-000000"
    gw = Baton(tmp_path, [
        {"id": "groq", "kind": "openai-compatible", "baseUrl": limited.url + "/v1", "models": ["llama"],
         "keys": [{"env": "BATON_TEST_WS_GROQ_KEY"}], "priority": 1},
        {"id": "claude", "kind": "anthropic", "baseUrl": claude.url + "/v1", "models": ["claude-real-model"],
         "keys": [{"env": "BATON_TEST_WS_CLAUDE_KEY"}], "priority": 2}],
        model_map={"gpt-*": "auto"})
    home = tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.py").write_text("print('HELLO OVER WEBSOCKET')\n")
    try:
        # The first provider is rate-limited at once; Claude runs the script with Codex's shell
        # function, then reports.
        limited.script("429")
        claude.script("tool:exec_command:" + json.dumps({"cmd": "python3 hello.py"}))
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(codex_home),
               "RUST_LOG": "codex_api=info"}
        # The gateway key as Codex's own API key, the way a user gives it one.
        login = subprocess.run([CODEX, "login", "--with-api-key"], input=gw.key, env=env,
                               capture_output=True, text=True, timeout=60)
        assert login.returncode == 0, login.stdout + login.stderr
        out = subprocess.run([CODEX, "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access",
                              "-c", f'openai_base_url="{gw.base_url}"', "-m", "gpt-5.1-codex",
                              "run hello.py and tell me what it printed"],
                             cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "claude: " in out.stdout, out.stdout + out.stderr
        # On the WebSocket all along: no reconnect, no fallback to HTTPS.
        assert "successfully connected to Responses WebSocket" in out.stderr, out.stderr
        for trouble in ("Reconnecting", "Falling back from WebSockets", "failed to connect to Responses WebSocket"):
            assert trouble not in out.stderr, out.stderr
        sent = claude.stats()["last"]
        results = [b for m in sent["messages"] if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        assert results and "HELLO OVER WEBSOCKET" in json.dumps(results[-1]), "the tool ran and its output went back"
        assert limited.stats()["hits"] >= 1, "the rate-limited provider was tried first"
        # Logged like HTTP requests: each turn, the failover and who served.
        rows = sqlite3.connect(gw.data / "baton.db").execute(
            "SELECT provider, status FROM request_log ORDER BY rowid").fetchall()
        assert len(rows) >= 2 and all(r == ("claude", 200) for r in rows), rows
    finally:
        gw.stop()
        limited.stop()
        claude.stop()
