"""The real Claude Code, at the release the tests were written against (2.1.197) and at its
newest (2.1.332), both pinned, doing a multi-turn tool task through Baton with Baton's key to
every upstream kind, and one task whose turns each meet a limit and go on on the next kind.

The task: write hello.py (Write), run it (Bash), change it (Edit), run it again (Bash), report.
Each test asserts what the task produced: the file with the right content, and every tool
result the upstream got back carrying what the tool did (no error, no refusal)."""
import json
import os
import pathlib
import subprocess
import time

import pytest

from conftest import KINDS, Baton, Fake, tool_outputs

NPM = pathlib.Path.home() / ".cache/baton-npm"
CLAUDES = {
    "2.1.197": os.environ.get("CLAUDE_BIN") or str(NPM / "node_modules/.bin/claude"),
    "2.1.332": os.environ.get("CLAUDE_NEXT_BIN") or str(NPM / "claude-next/node_modules/.bin/claude"),
}


def need(version):
    exe = CLAUDES[version]
    if not os.path.exists(exe):
        if os.environ.get("CI"):
            pytest.fail(f"Claude Code {version} is not installed at {exe}; .ci/run installs it")
        pytest.skip(f"Claude Code {version} not installed (scripts/test installs it)")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith(version), out.stdout + out.stderr
    return exe


def task(work):
    """What the fake model does, turn by turn (Claude Code's own tools and their inputs)."""
    script = str(work / "hello.py")
    return [
        "tool:Write:" + json.dumps({"file_path": script, "content": "print('FIRST')\n"}),
        "tool:Bash:" + json.dumps({"command": f"python3 {script}", "description": "run it"}),
        "tool:Edit:" + json.dumps({"file_path": script, "old_string": "FIRST",
                                   "new_string": "SECOND"}),
        "tool:Bash:" + json.dumps({"command": f"python3 {script}", "description": "run it again"}),
    ]


def run_claude(exe, gw, tmp_path, prompt):
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home),
           "ANTHROPIC_BASE_URL": gw.url, "ANTHROPIC_API_KEY": gw.key,
           "CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    out = subprocess.run([exe, "-p", prompt, "--output-format", "json", "--allowedTools",
                          "Write", "Bash", "Edit"], cwd=work, env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["is_error"] is False, result
    return result, work


def check_outputs(outputs):
    assert len(outputs) == 4, outputs
    for o in outputs:
        assert "error" not in o.lower() and "not been read" not in o, outputs
    assert "FIRST" in outputs[1] and "SECOND" in outputs[3], outputs


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("version", list(CLAUDES))
def test_claude_code_does_a_tool_task_on_every_kind(tmp_path, version, kind):
    exe = need(version)
    up = Fake("up")
    os.environ["BATON_TEST_CLAUDE_UP_KEY"] = "sk-claude-session-up-key-0000000000"
    gw = Baton(tmp_path, [{"id": "up", "kind": kind, "baseUrl": up.url + KINDS[kind],
                           "models": ["up-model"], "keys": [{"env": "BATON_TEST_CLAUDE_UP_KEY"}]}])
    try:
        (tmp_path / "work").mkdir()
        up.script(*task(tmp_path / "work"))
        result, work = run_claude(exe, gw, tmp_path, "write hello.py, run it, change it, run it again")
        assert (work / "hello.py").read_text() == "print('SECOND')\n", result
        assert result["result"].startswith("up: "), result
        check_outputs(tool_outputs(kind, up.stats()["last"]))
    finally:
        gw.stop()
        up.stop()


@pytest.mark.parametrize("version", list(CLAUDES))
def test_claude_code_fails_over_through_every_kind_and_comes_back(tmp_path, version):
    """Each turn of the task meets a rate limit on the provider that served the one before: the
    Anthropic provider writes the file and is limited for 15 s; Chat Completions runs it, the
    Responses provider changes it, Gemini runs it again, each limited after its turn. The
    conversation goes from API to API intact; once the first limit has passed, the next task is
    the Anthropic provider's again."""
    exe = need(version)
    order = ["anthropic", "openai-compatible", "openai-responses", "gemini"]
    fakes = {kind: Fake(kind.split("-")[-1]) for kind in order}
    os.environ["BATON_TEST_CLAUDE_UP_KEY"] = "sk-claude-session-up-key-0000000000"
    gw = Baton(tmp_path, [{"id": kind, "kind": kind, "baseUrl": fakes[kind].url + KINDS[kind],
                           "models": ["up-model"], "keys": [{"env": "BATON_TEST_CLAUDE_UP_KEY"}],
                           "priority": n + 1} for n, kind in enumerate(order)])
    try:
        (tmp_path / "work").mkdir()
        steps = task(tmp_path / "work")
        fakes["anthropic"].script(steps[0], "429:15")
        fakes["openai-compatible"].script(steps[1], "429:3600")
        fakes["openai-responses"].script(steps[2], "429:3600")
        fakes["gemini"].script(steps[3])
        result, work = run_claude(exe, gw, tmp_path, "write hello.py, run it, change it, run it again")
        assert (work / "hello.py").read_text() == "print('SECOND')\n", result
        assert result["result"].startswith("gemini: "), result
        check_outputs(tool_outputs("gemini", fakes["gemini"].stats()["last"]))
        hits = fakes["anthropic"].stats()["hits"]
        time.sleep(16)
        fakes["anthropic"].script("ok")
        result, _ = run_claude(exe, gw, tmp_path, "say hi")
        assert result["result"] == "anthropic: say hi", result
        assert fakes["anthropic"].stats()["hits"] == hits + 1
    finally:
        gw.stop()
        for f in fakes.values():
            f.stop()
