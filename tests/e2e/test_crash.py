"""kill -9 right after a 429: the cooldown Baton learned is on disk before the failover answer
reached the client, so the restarted gateway never calls the limited key again."""
import json
import signal
import urllib.request

import openai

from conftest import Baton, Fake, provider


def test_a_cooldown_survives_kill_9_right_after_the_failover_answer(tmp_path):
    a, b = Fake("a"), Fake("b")
    try:
        for round_ in range(5):
            data = tmp_path / f"run{round_}"
            data.mkdir()
            baton = Baton(data, [provider("a", a, 10), provider("b", b, 20)])
            a.script("429")
            hits_before = a.stats()["hits"]
            c = openai.OpenAI(base_url=baton.base_url, api_key=baton.key, max_retries=0)
            raw = c.chat.completions.with_raw_response.create(
                model="auto", messages=[{"role": "user", "content": "x"}])
            # The answer is in: kill at once, with no chance to flush anything.
            baton.proc.send_signal(signal.SIGKILL)
            baton.proc.wait()
            assert raw.headers["x-gateway-provider"] == "b"
            assert a.stats()["hits"] == hits_before + 1

            again = Baton(data, [provider("a", a, 10), provider("b", b, 20)])
            try:
                c = openai.OpenAI(base_url=again.base_url, api_key=again.key, max_retries=0)
                raw = c.chat.completions.with_raw_response.create(
                    model="auto", messages=[{"role": "user", "content": "y"}])
                assert raw.headers["x-gateway-provider"] == "b", f"round {round_}"
                assert a.stats()["hits"] == hits_before + 1, "the limited key was not called again"
                req = urllib.request.Request(again.url + "/admin/state", headers={
                    "x-admin-key": (again.data / "admin.key").read_text().strip()})
                state = json.loads(urllib.request.urlopen(req).read())
                a_state = next(p for p in state["providers"] if p["id"] == "a")
                assert json.dumps(a_state).count("rate") >= 1, a_state
            finally:
                again.stop()
    finally:
        a.stop()
        b.stop()
