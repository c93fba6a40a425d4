"""Hosted web search on a translated route, with the real clients (pinned): Claude Code's
WebSearch (its own Messages request with the `web_search_20250305` server tool) and Codex's
`web_search` served by an OpenAI-compatible / Anthropic upstream, Baton searching through a fake
SearXNG on loopback. The clients must read Baton's answer as their own API's search."""
import json
import os
import pathlib
import subprocess
import urllib.request

import pytest

CLAUDE = os.environ.get("CLAUDE_BIN") or str(
    pathlib.Path.home() / ".cache/baton-npm/node_modules/.bin/claude")
CODEX = os.environ.get("CODEX_BIN") or str(
    pathlib.Path.home() / ".cache/baton-npm/node_modules/.bin/codex")


def need(binary, name):
    if not os.path.exists(binary):
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed at {binary}; .ci/run installs it")
        pytest.skip(f"{name} not installed (scripts/test installs it)")


def use_searxng(gw, fake):
    """Settings → Web search: the fake's own SearXNG."""
    req = urllib.request.Request(
        gw.url + "/admin/web-search", method="PUT",
        data=json.dumps({"backend": "searxng", "url": fake.url}).encode(),
        headers={"content-type": "application/json",
                 "x-admin-key": (gw.data / "admin.key").read_text().strip()})
    view = json.loads(urllib.request.urlopen(req).read())
    assert view["unavailable"] is None, view


def test_claude_codes_websearch_on_an_openai_upstream(tmp_path):
    from conftest import Baton, Fake, provider
    need(CLAUDE, "Claude Code")
    up = Fake("a")
    gw = Baton(tmp_path, [provider("a", up, 10)])
    try:
        use_searxng(gw, up)
        # The main model asks for WebSearch; Claude Code then sends its own search request,
        # which the same (OpenAI-compatible) model serves through Baton's search.
        up.script("tool:WebSearch:" + json.dumps({"query": "baton gateway"}))
        home = tmp_path / "home"
        home.mkdir()
        work = tmp_path / "work"
        work.mkdir()
        env = {"PATH": os.environ["PATH"], "HOME": str(home),
               "ANTHROPIC_BASE_URL": gw.url, "ANTHROPIC_API_KEY": gw.key,
               "CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_TELEMETRY": "1",
               "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        out = subprocess.run([CLAUDE, "-p", "search the web for baton gateway", "--output-format",
                              "json", "--allowedTools", "WebSearch"], cwd=work, env=env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        result = json.loads(out.stdout)
        assert result["is_error"] is False, result
        stats = up.stats()
        # Claude Code's own search request asked for "baton gateway"; the model searched once.
        assert len(stats["searches"]) == 1, stats["searches"]
        assert "baton gateway" in stats["searches"][0]
        # Claude Code read Baton's server_tool_use / web_search_tool_result blocks: the links it
        # found went back to the main model as WebSearch's result.
        sent = stats["last"]
        tool_msgs = [m for m in sent["messages"] if m["role"] == "tool"]
        assert tool_msgs, sent["messages"]
        read = json.dumps(tool_msgs[-1]["content"])
        assert "Web search results for query" in read, read
        assert "https://docs.example.org/" in read and "Example Docs" in read, read
    finally:
        gw.stop()
        up.stop()


def test_codexs_web_search_on_an_anthropic_upstream(tmp_path):
    from conftest import Baton, Fake
    need(CODEX, "Codex")
    claude = Fake("claude")
    os.environ["BATON_TEST_SEARCH_CLAUDE_KEY"] = "sk-ant-api03-search-test-key-0000"
    gw = Baton(tmp_path, [
        {"id": "claude", "kind": "anthropic", "baseUrl": claude.url + "/v1",
         "models": ["claude-real-model"], "keys": [{"env": "BATON_TEST_SEARCH_CLAUDE_KEY"}]}],
        model_map={"gpt-*": "auto"})
    try:
        use_searxng(gw, claude)
        claude.script("tool:web_search:" + json.dumps({"query": "codex web search"}))
        home = tmp_path / "home"
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True)
        work = tmp_path / "work"
        work.mkdir()
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(codex_home)}
        login = subprocess.run([CODEX, "login", "--with-api-key"], input=gw.key, env=env,
                               capture_output=True, text=True, timeout=60)
        assert login.returncode == 0, login.stdout + login.stderr
        out = subprocess.run([CODEX, "exec", "--skip-git-repo-check", "--json",
                              "-c", f'openai_base_url="{gw.base_url}"', "-c", 'web_search="live"',
                              "-m", "gpt-5.1-codex", "look up codex web search"],
                             cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        items = [e.get("item", {}) for e in events if e.get("type") == "item.completed"]
        searches = [i for i in items if i.get("type") == "web_search"]
        assert searches and searches[0].get("query") == "codex web search", items
        messages = [i for i in items if i.get("type") == "agent_message"]
        assert messages and messages[-1]["text"].startswith("claude: "), items
        assert claude.stats()["searches"] == ["codex web search"]
        # The Anthropic model got the results as its tool's output.
        sent = claude.stats()["last"]
        results = [b for m in sent["messages"] if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        assert results and "docs.example.org/codex-web-search" in json.dumps(results[-1]), sent
    finally:
        gw.stop()
        claude.stop()
