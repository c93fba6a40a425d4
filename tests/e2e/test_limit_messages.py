"""With every candidate capped for an hour, the real agents tell the user at once, with the reset
time: Claude Code (both pinned releases) on its own subscription shows its usage-limit line,
Codex its "You've hit your usage limit. Try again at …" over its WebSocket and over HTTP. Before,
Codex waited silently (a rate limit it retries for as long as it lasts) and Claude Code on a
subscription said the server was limiting requests, "not your usage limit".

Each run is bounded (a silent wait fails by its timeout); the time each took is printed for
the record (`pytest -s`), not asserted: tests measure no speed."""
import json
import os
import pathlib
import subprocess
import time

import pytest

from conftest import Baton, Fake

NPM = pathlib.Path.home() / ".cache/baton-npm"
CLAUDES = {
    "2.1.197": os.environ.get("CLAUDE_BIN") or str(NPM / "node_modules/.bin/claude"),
    "2.1.332": os.environ.get("CLAUDE_NEXT_BIN") or str(NPM / "claude-next/node_modules/.bin/claude"),
}
CODEX = os.environ.get("CODEX_BIN") or str(NPM / "node_modules/.bin/codex")


def need(exe):
    if not os.path.exists(exe):
        if os.environ.get("CI"):
            pytest.fail(f"{exe} is not installed; .ci/run installs it")
        pytest.skip(f"{exe} not installed (scripts/test installs it)")


def timed(args, **kw):
    start = time.monotonic()
    out = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=60, **kw)
    print(f"{os.path.basename(args[0])}: the limit message after {time.monotonic() - start:.2f} s")
    return out


@pytest.mark.parametrize("version", list(CLAUDES))
def test_claude_code_on_its_subscription_shows_the_limit_and_its_reset(tmp_path, version):
    exe = CLAUDES[version]
    need(exe)
    token = "sk-ant-oat01-fake-subscription-login-limit-0001"
    sub = Fake("sub", "--subscription", token)
    sub.script("claude-cap:3600")
    gw = Baton(tmp_path, [{"id": "sub", "name": "Claude", "kind": "anthropic",
                           "baseUrl": sub.url + "/v1", "credentials": "client", "models": ["*"]}],
               model_map={"claude-*": "auto"})
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {
        "accessToken": token, "refreshToken": "sk-ant-ort01-fake", "expiresAt": 4102444800000,
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}}))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": gw.url,
           "ANTHROPIC_CUSTOM_HEADERS": f"x-baton-key: {gw.key}", "DISABLE_TELEMETRY": "1",
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    try:
        # The first request meets the cap; the second finds every candidate cooling.
        for _ in range(2):
            out = timed([exe, "-p", "hi"], cwd=tmp_path, env=env)
            said = out.stdout + out.stderr
            assert out.returncode != 0, said
            assert "limit" in said and "resets" in said, said
            assert "not your usage limit" not in said, said
    finally:
        gw.stop()
        sub.stop()


@pytest.mark.parametrize("transport", ["http", "websocket"])
def test_codex_shows_the_usage_limit_and_when_to_try_again(tmp_path, transport):
    need(CODEX)
    up = Fake("up")
    up.script("429:3600")
    os.environ["BATON_TEST_LIMIT_KEY"] = "sk-limit-test-key-000000000000"
    gw = Baton(tmp_path, [{"id": "up", "kind": "openai-responses", "baseUrl": up.url + "/v1",
                           "models": ["up-model"], "keys": [{"env": "BATON_TEST_LIMIT_KEY"}]}],
               model_map={"gpt-*": "auto"})
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home / ".codex")}
    try:
        if transport == "http":
            from conftest import baton_connect
            baton_connect(gw, home, "codex", env={"CODEX_HOME": env["CODEX_HOME"]})
            extra = []
        else:
            login = subprocess.run([CODEX, "login", "--with-api-key"], input=gw.key, env=env,
                                   capture_output=True, text=True, timeout=60)
            assert login.returncode == 0, login.stdout + login.stderr
            extra = ["-c", f'openai_base_url="{gw.base_url}"']
        for _ in range(2):
            out = timed([CODEX, "exec", "--skip-git-repo-check", *extra, "say hi"], cwd=tmp_path,
                        env=env)
            said = out.stdout + out.stderr
            assert "hit your usage limit" in said and "Try again at" in said, said
            assert "Upgrade" not in said, "no plan of the user's is named: " + said
    finally:
        gw.stop()
        up.stop()
