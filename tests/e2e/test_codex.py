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


def test_codex_on_its_own_chatgpt_login_then_failover_at_the_cap(tmp_path):
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
    gw = Baton(tmp_path, [
        {"id": "chatgpt", "name": "ChatGPT", "kind": "openai-responses", "baseUrl": sub.url + "/v1",
         "credentials": "client", "models": ["*"], "priority": 1},
        {"id": "claude", "kind": "anthropic", "baseUrl": other.url + "/v1",
         "models": ["claude-real-model"], "priority": 2}], model_map={"gpt-*": "auto"})
    (codex_home / "config.toml").write_text(
        'model_provider = "baton"\n\n[model_providers.baton]\nname = "Baton"\n'
        f'base_url = "{gw.url}/v1"\nwire_api = "responses"\nrequires_openai_auth = true\n'
        'supports_websockets = false\nenv_http_headers = { "x-baton-key" = "BATON_KEY" }\n')
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(codex_home),
           "BATON_KEY": gw.key}

    def ask(prompt):
        out = subprocess.run([CODEX, "exec", "--skip-git-repo-check", prompt], cwd=work, env=env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    try:
        # Codex's own model name goes to the subscription unchanged, its request passed through.
        assert "chatgpt: say hi" in ask("say hi"), "the subscription answered (it takes only that login)"
        sent = sub.stats()["last"]
        assert sent["model"].startswith("gpt-") and sent["store"] is False
        sub.script("429")
        assert "claude: say hi" in ask("say hi"), "at the cap the next provider answered, translated"
        assert other.stats()["last"]["model"] == "claude-real-model"
    finally:
        gw.stop()
        sub.stop()
        other.stop()
