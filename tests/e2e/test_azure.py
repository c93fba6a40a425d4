"""Azure OpenAI as a provider, against the real `baton serve` and a fake as strict as Azure (key in
`api-key`, `api-version` required on the deployments form, the deployment one of the resource's).
What Baton sends is compared with what Microsoft's own client sends (the `AzureOpenAI` class of
the official openai SDK), and the real Codex on its default model fails over from a rate-limited
Responses provider to an Azure deployment mid-task and comes back when the limit has passed."""
import os
import time

import openai

from conftest import Baton, Fake
from test_codex_default_model import (CHANGE, RUN, WRITE, codex_env, exec_call, need_codex,
                                      run_codex, transport_args)
from conftest import tool_outputs

KEY = "0123456789abcdef0123456789abcdef"


def azure_provider(fake, **extra):
    os.environ["BATON_TEST_AZURE_KEY"] = KEY
    return {"id": "az", "kind": "azure-openai", "baseUrl": fake.url, "models": ["gpt-4o-prod"],
            "keys": [{"env": "BATON_TEST_AZURE_KEY"}], **extra}


def everything(fake):
    return fake.stats(all=True)


def test_baton_calls_azure_as_microsofts_own_client_does(tmp_path):
    fake = Fake("az", "--azure-deployments", "gpt-4o-prod")
    gw = Baton(tmp_path, [azure_provider(fake)], model_map={"gpt-*": "az"})
    try:
        direct = openai.AzureOpenAI(azure_endpoint=fake.url, api_key=KEY, api_version="2024-10-21",
                                    max_retries=0)
        a = direct.chat.completions.create(model="gpt-4o-prod",
                                           messages=[{"role": "user", "content": "hello"}])
        via = openai.OpenAI(base_url=gw.base_url, api_key=gw.key, max_retries=0)
        b = via.chat.completions.create(model="az/gpt-4o-prod",
                                        messages=[{"role": "user", "content": "hello"}])
        assert a.choices[0].message.content == b.choices[0].message.content == "az: hello"
        seen = everything(fake)
        sdk_path, baton_path = seen["azureCalls"]
        assert sdk_path == baton_path, (sdk_path, baton_path)
        sdk, baton = seen["headers"]
        for h in (sdk, baton):
            assert h["api-key"] == KEY and "authorization" not in h, h
            assert h["content-type"].startswith("application/json"), h
        assert seen["all"][0] == seen["all"][1], "the same body"

        # Streamed through Baton, and a deployment the resource lacks is Azure's 404, relayed
        # as the client's not-found when no other provider can serve it.
        chunks = list(via.chat.completions.create(
            model="az/gpt-4o-prod", messages=[{"role": "user", "content": "hello"}], stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "az: hello"
    finally:
        gw.stop()
        fake.stop()


def test_codex_fails_over_to_azure_mid_task_and_comes_back(tmp_path):
    """The real Codex, default model, WebSocket transport: the Responses provider writes the
    file and is then rate-limited for 15 s; the Azure deployment (Chat Completions, translated)
    runs it, changes it and runs it again with every tool output intact; after the limit the next
    task is the Responses provider's again."""
    need_codex()
    responses = Fake("openai")
    az = Fake("az", "--azure-deployments", "up-model")
    os.environ["BATON_TEST_CODEX_UP_KEY"] = "sk-codex-default-up-key-0000000000"
    providers = [{"id": "openai", "kind": "openai-responses", "baseUrl": responses.url + "/v1",
                  "models": ["up-model"], "keys": [{"env": "BATON_TEST_CODEX_UP_KEY"}],
                  "priority": 1},
                 {**azure_provider(az), "models": ["up-model"], "priority": 2}]
    gw = Baton(tmp_path, providers, model_map={"gpt-*": "auto"})
    home, work, env = codex_env(tmp_path)
    try:
        extra = transport_args("websocket", gw, home, env)
        responses.script(exec_call(WRITE), "429:15")
        az.script(exec_call(RUN), exec_call(CHANGE), exec_call(RUN))
        out = run_codex(work, env, *extra, "write hello.py, run it, rewrite it, run it again")
        assert (work / "hello.py").read_text() == "print('SECOND')\n", out.stdout + out.stderr
        assert "az: " in out.stdout, out.stdout
        seen = everything(az)
        assert all(p.startswith("/openai/deployments/up-model/chat/completions?api-version=")
                   for p in seen["azureCalls"]), seen["azureCalls"]
        outputs = tool_outputs("openai-compatible", seen["last"])
        assert len(outputs) == 4, outputs
        assert not any("aborted" in o for o in outputs), outputs
        assert "FIRST" in outputs[1] and "SECOND" in outputs[3], outputs
        hits = responses.stats()["hits"]
        time.sleep(16)
        responses.script("ok")
        out = run_codex(work, env, *extra, "say hi")
        assert "openai: " in out.stdout, out.stdout + out.stderr
        assert responses.stats()["hits"] == hits + 1
    finally:
        gw.stop()
        responses.stop()
        az.stop()
