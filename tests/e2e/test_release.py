"""The release workflow, as far as a Linux machine can check it: the YAML parses, every job runs
on the platform it names, the scripts it calls exist, and the manifest script makes a
latest.json that the app's own rules accept (and refuses a build signed as another version).
The macOS and Windows jobs themselves have not run here."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github/workflows/release.yml"


def test_the_workflow_parses_and_calls_scripts_that_exist():
    wf = yaml.safe_load(WORKFLOW.read_text())
    # YAML 1.1 reads the key `on` as True.
    trigger = wf.get("on", wf.get(True))
    assert trigger["push"]["tags"] == ["v*.*.*"]
    jobs = wf["jobs"]
    assert set(jobs) == {"linux", "macos", "windows", "publish"}
    assert jobs["publish"]["needs"] == ["linux", "macos", "windows"]
    runs = "\n".join(step.get("run", "") for job in jobs.values() for step in job["steps"])
    for script in set(re.findall(r"scripts/[\w./-]+", runs)):
        path = ROOT / script
        assert path.is_file() and path.stat().st_mode & 0o111, f"{script} is called but missing"
    assert "libwayland-*.so*" in runs, "the AppImage drops the bundled Wayland libraries"
    assert "universal-apple-darwin" in runs and "msi,nsis" in runs
    assert wf["env"]["BATON_UPDATE_PUBKEY"] and wf["env"]["BATON_UPDATE_URL"].endswith("/latest.json")


@pytest.mark.skipif(shutil.which("minisign") is None, reason="minisign is installed by scripts/desktop-deps --test")
def test_the_manifest_script_signs_off_only_matching_builds(tmp_path):
    subprocess.run(["minisign", "-G", "-W", "-p", str(tmp_path / "k.pub"), "-s", str(tmp_path / "k.sec")],
                   check=True, capture_output=True)
    dist = tmp_path / "dist"
    dist.mkdir()
    build = dist / "baton-desktop-linux-x86_64"
    build.write_bytes(b"\x7fELF pretend build")
    (dist / "baton_1.2.3_amd64.deb").write_bytes(b"deb")

    def sign(comment):
        subprocess.run(["minisign", "-S", "-s", str(tmp_path / "k.sec"), "-m", str(build), "-t", comment],
                       check=True, capture_output=True)

    def manifest():
        return subprocess.run([str(ROOT / "scripts/release-manifest"), "--version", "v1.2.3", "--base-url",
                               "https://example.invalid/r/v1.2.3", "--date", "2026-12-24T00:00:00Z", str(dist)],
                              capture_output=True, text=True)

    sign("baton-desktop 1.2.2 linux-x86_64")
    r = manifest()
    assert r.returncode != 0 and "signed as 'baton-desktop 1.2.2 linux-x86_64'" in r.stderr, r.stderr
    sign("baton-desktop 1.2.3 linux-x86_64")
    r = manifest()
    assert r.returncode == 0, r.stderr
    m = json.loads((dist / "latest.json").read_text())
    assert m["version"] == "1.2.3" and m["pub_date"] == "2026-12-24T00:00:00Z"
    entry = m["platforms"]["linux-x86_64"]
    assert entry["url"] == "https://example.invalid/r/v1.2.3/baton-desktop-linux-x86_64"
    assert entry["signature"] == (dist / "baton-desktop-linux-x86_64.minisig").read_text()
    sums = (dist / "SHA256SUMS").read_text()
    assert "baton_1.2.3_amd64.deb" in sums and "latest.json" in sums
    subprocess.run(["sha256sum", "--check", "SHA256SUMS"], cwd=dist, check=True, capture_output=True)
