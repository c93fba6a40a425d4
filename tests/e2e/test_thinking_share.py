"""Thinking stays on across failover: the real Claude Code (both pinned releases) thinks
(MAX_THINKING_TOKENS) through a 15-turn tool session whose turns move between Anthropic accounts,
and the real Codex on its default model asks for reasoning through a session served by Claude.

Each upstream is a strict fake of the Messages API: it signs its own thinking, refuses a block
another account signed, and refuses thinking `enabled` when the final assistant turn called a tool
without beginning with thinking, as the real API does. The share of turns sent with thinking on
is measured and printed (`-s` shows it); the target is at least 14 of 15 turns."""
import json
import os

import pytest

from conftest import Baton, Fake
from test_claude_code_sessions import CLAUDES, need

TURNS = 15
MODEL = "claude-sonnet-4-5"


def commands(work, slow=()):
    """Fourteen tool turns (each runs a command that appends its number to a file; those in
    `slow` take a second) and the answer: what the task must leave behind is the file with every
    number in order."""
    log = work / "turns.txt"
    return ["tool:Bash:" + json.dumps({
        "command": ("sleep 1; " if n in slow else "") + f"echo {n} >> {log}",
        "description": f"turn {n}"}) for n in range(1, TURNS)], log


def thinks(body):
    return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")


def closed(body):
    """Whether Baton wrote the request's final tool exchange as text (to keep thinking on
    where that exchange had no thinking this account signed)."""
    last = body["messages"][-1]["content"]
    return len(body["messages"]) > 1 and isinstance(last, list) and any(
        b.get("type") == "text" and b.get("text", "").startswith("(The `") for b in last)


def turns(plans):
    """Every main-loop request the fakes served (side requests carry no tools; a request the
    script answered with a limit was served elsewhere): (fake, body)."""
    out = []
    for name, (fake, script) in plans.items():
        for n, body in enumerate(fake.stats(all=True)["all"]):
            limited = n < len(script) and not script[n].startswith("tool:")
            if body.get("tools") and not limited:
                out.append((name, body))
    return out


def claude(exe, gw, tmp_path):
    import subprocess
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home),
           "ANTHROPIC_BASE_URL": gw.url, "ANTHROPIC_API_KEY": gw.key,
           "MAX_THINKING_TOKENS": "4000",
           "CLAUDE_CODE_MAX_RETRIES": "0", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    out = subprocess.run([exe, "-p", "append the turn numbers", "--output-format", "json",
                          "--model", MODEL, "--allowedTools", "Bash"], cwd=work, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["is_error"] is False, result
    return result, out.stderr


SCENARIOS = {
    # Both accounts serve the name Claude Code asked for; a caps at turn 5 and b serves the rest.
    "same-name": ([MODEL], [MODEL], "a-caps", 1),
    # They serve another name (the client's is mapped): the answers name the served model.
    "other-name": (["claude-served-1"], ["claude-served-2"], "a-caps", 1),
    # a caps for a few seconds, b serves, b caps, a serves the rest: A -> B -> A.
    "a-b-a": ([MODEL], [MODEL], "a-b-a", 2),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("version", list(CLAUDES))
def test_claude_code_keeps_thinking_across_failover(tmp_path, version, scenario):
    exe = need(version)
    a_models, b_models, plan, switches = SCENARIOS[scenario]
    a, b = Fake("a"), Fake("b")
    model_map = {"claude-*": "auto"} if a_models[0] != MODEL else None
    gw = Baton(tmp_path, [
        {"id": "a", "kind": "anthropic", "baseUrl": a.url + "/v1", "models": a_models,
         "priority": 1},
        {"id": "b", "kind": "anthropic", "baseUrl": b.url + "/v1", "models": b_models,
         "priority": 2}], model_map=model_map)
    try:
        work = tmp_path / "work"
        work.mkdir()
        steps, log = commands(work, slow=range(5, 10))
        if plan == "a-caps":
            plans = {"a": (a, [*steps[:4], "claude-cap"]), "b": (b, steps[4:])}
        else:
            # a is limited at turn 5 for 5 s; b serves turns 5-9 (their commands take a second
            # each) and is then capped for an hour; a, back by then, serves the rest.
            plans = {"a": (a, [*steps[:4], "429:5", *steps[9:]]),
                     "b": (b, [*steps[4:9], "claude-cap"])}
        for fake, script in plans.values():
            fake.script(*script)
        result, stderr = claude(exe, gw, tmp_path)
        assert log.read_text().split() == [str(n) for n in range(1, TURNS)], result
        sent = turns(plans)
        assert len(sent) == TURNS, [f for f, _ in sent]
        share = sum(thinks(body) for _, body in sent)
        print(f"\nthinking share, Claude Code {version}, {scenario}: {share} of {len(sent)}")
        assert share >= len(sent) - 1, [(f, thinks(body)) for f, body in sent]
        # Only a turn that changed accounts had its exchange closed: Claude Code kept its own
        # thinking on every other turn (the answers named the model it asked for).
        assert sum(closed(body) for _, body in sent) <= switches, \
            [(f, closed(body)) for f, body in sent]
    finally:
        gw.stop()
        a.stop()
        b.stop()


def test_codex_thinks_on_every_turn_of_a_session_served_by_claude(tmp_path):
    """The real Codex on its default model asks for reasoning; an Anthropic provider serves
    the whole 15-turn session, translated. Every turn goes with thinking on (no signed thinking
    can come back from Codex, so each turn's final exchange is closed), and the task is done."""
    from test_codex_default_model import codex_env, exec_call, need_codex, run_codex, \
        transport_args
    need_codex()
    up = Fake("claude")
    os.environ["BATON_TEST_CODEX_UP_KEY"] = "sk-codex-thinking-up-key-0000000000"
    gw = Baton(tmp_path, [{"id": "claude", "kind": "anthropic", "baseUrl": up.url + "/v1",
                           "models": [MODEL], "keys": [{"env": "BATON_TEST_CODEX_UP_KEY"}]}],
               model_map={"gpt-*": "claude/" + MODEL})
    home, work, env = codex_env(tmp_path)
    try:
        extra = transport_args("http", gw, home, env)
        up.script(*[exec_call(f"const r = await tools.exec_command({{cmd: 'echo {n} >> turns.txt'}});"
                              " text(typeof r === 'string' ? r : JSON.stringify(r));")
                    for n in range(1, TURNS)], "ok")
        out = run_codex(work, env, *extra, "append the turn numbers")
        assert (work / "turns.txt").read_text().split() == [str(n) for n in range(1, TURNS)], \
            out.stdout + out.stderr
        sent = [b for b in up.stats(all=True)["all"] if b.get("tools")]
        assert len(sent) == TURNS, len(sent)
        share = sum(thinks(body) for body in sent)
        print(f"\nthinking share, Codex -> Claude: {share} of {len(sent)}")
        assert share >= len(sent) - 1, [thinks(body) for body in sent]
    finally:
        gw.stop()
        up.stop()
