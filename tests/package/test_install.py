"""The packages as a user meets them. The .deb is installed with `apt-get install ./baton_….deb`
on this machine (it must run as root; CI's machine is thrown away after the run) and used by a
fresh user account made for the test, in a desktop session of its own (Xvfb, a tray host, a
notification daemon). A container or chroot would also prove the declared dependencies on a
bare system, but costs minutes of downloads per run; here `dpkg-shlibdeps` derives them from the
binaries, and the test checks each is a real package that `apt-get` resolved.

Steps: install the previous version, first start (window, tray, 127.0.0.1:8787, a provider and a
typed key, one request, start at login), upgrade, start from the autostart entry (same data),
remove (the data stays), reinstall (found again). The .rpm and the .tar.gz are checked by their
contents and by running what they hold."""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

DIST = Path(os.environ["BATON_DIST"])
VERSION = os.environ["BATON_VERSION"]
PREVIOUS = os.environ["BATON_PREVIOUS_VERSION"]
HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE / "artifacts"


def run(*args, check=True, **kw):
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def apt(*args, cwd=None):
    return run("apt-get", "-o", "DPkg::Lock::Timeout=900", "-y", "-qq", *args, cwd=cwd,
               env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def deb(version):
    arch = run("dpkg", "--print-architecture").stdout.strip()
    p = DIST / f"baton_{version}_{arch}.deb"
    assert p.exists(), f"{p} was not built"
    return p


def installed_version():
    p = run("dpkg-query", "-W", "-f=${Status} ${Version}", "baton", check=False)
    m = re.match(r"install ok installed (\S+)", p.stdout)
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def user():
    if os.geteuid() != 0:
        pytest.fail("the install test installs a package: run it as root (CI does)")
    if installed_version():
        apt("remove", "baton")
    # Another user's tray app ran first: the tray library's shared default folder for icon
    # images is theirs (root's here), which left every later user's tray icon empty.
    Path("/tmp/tray-icon").mkdir(mode=0o755, exist_ok=True)
    name = f"batonpkg{os.getpid()}"
    run("useradd", "--create-home", "--shell", "/bin/sh", name)
    shared = Path(tempfile.mkdtemp(prefix="baton-pkg-"))
    os.chmod(shared, 0o777)
    shutil.copy(HERE / "user_step.py", shared / "user_step.py")
    shutil.copy(HERE / "session.conf", shared / "session.conf")
    shutil.copy(os.environ["FAKE_UPSTREAM_BIN"], shared / "fake-upstream")
    for f in shared.iterdir():
        os.chmod(f, 0o755)
    ARTIFACTS.mkdir(exist_ok=True)
    yield {"name": name, "home": Path(f"/home/{name}"), "shared": shared}
    if installed_version():
        apt("remove", "baton")
    run("userdel", "--remove", name, check=False)
    shutil.rmtree(shared, ignore_errors=True)


def step(user, name):
    """Runs one user_step.py step as the fresh user, in a D-Bus session of their own."""
    env = ["HOME=" + str(user["home"]), "USER=" + user["name"], "DISPLAY=" + os.environ["DISPLAY"],
           "PATH=/usr/bin:/bin", "LANG=C.UTF-8", f"SHOTS={user['shared']}",
           f"FAKE_UPSTREAM={user['shared'] / 'fake-upstream'}"]
    p = run("runuser", "-u", user["name"], "--", "env", "-i", *env, "dbus-run-session",
            "--config-file=" + str(user["shared"] / "session.conf"), "--", "python3", str(user["shared"] / "user_step.py"), name, check=False, timeout=180)
    for f in [*user["shared"].glob("*.png"), *user["shared"].glob("app-*.log")]:
        shutil.copy(f, ARTIFACTS / f.name)
    # The app's own log says why it stopped (it is kept in the artifacts too).
    log = user["shared"] / f"app-{name}.log"
    tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:]) if log.exists() else ""
    assert p.returncode == 0, f"step {name} failed:\n{p.stdout}\n{p.stderr}\napp log:\n{tail}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def request_log_rows(user):
    db = user["home"] / ".local/share/baton/baton.db"
    return sqlite3.connect(db).execute("SELECT count(*) FROM request_log").fetchone()[0]


def test_the_deb_installs_starts_at_login_upgrades_and_keeps_the_users_data(user):
    # The previous version, as apt installs a downloaded package.
    apt("install", f"./{deb(PREVIOUS).name}", cwd=DIST)
    assert installed_version() == PREVIOUS
    files = run("dpkg", "-L", "baton").stdout.split()
    for f in ["/usr/bin/baton", "/usr/bin/baton-desktop", "/usr/share/applications/baton.desktop",
              "/usr/share/doc/baton/copyright"] + \
             [f"/usr/share/icons/hicolor/{s}x{s}/apps/baton.png" for s in (16, 24, 32, 48, 64, 128, 256, 512)]:
        assert f in files, f"{f} is not in the package"
    run("desktop-file-validate", "/usr/share/applications/baton.desktop")
    # Every declared dependency is a package apt resolved and installed.
    depends = run("dpkg-query", "-W", "-f=${Depends}", "baton").stdout
    assert "libwebkit2gtk-4.1-0" in depends and "libayatana-appindicator3-1" in depends, depends
    for dep in re.split(r",\s*", depends):
        name = dep.split()[0].split("|")[0]
        assert installed_version_of(name), f"{name} (declared) is not installed"
    assert run("/usr/bin/baton", "--version").stdout.strip() == f"baton {VERSION}"
    kind = run("file", "/usr/bin/baton-desktop").stdout
    assert "stripped" in kind and "not stripped" not in kind, kind

    first = step(user, "first")
    assert first["window"] and first["tray"] and first["health"] == 200, first
    assert "secrets.json" in first["data_files"] and "gateway.key" in first["data_files"], first
    assert re.search(r"^Exec=/usr/bin/baton-desktop( |$)", first["autostart"], re.M), first["autostart"]
    assert request_log_rows(user) == 1

    # An upgrade: the autostart entry still points at the installed binary, and a login start
    # from it finds the provider, the typed key and the request log.
    apt("install", f"./{deb(VERSION).name}", cwd=DIST)
    assert installed_version() == VERSION
    again = step(user, "again")
    assert again["autostart_exec"].startswith("/usr/bin/baton-desktop"), again
    assert again["providers"] == ["homelab"] and again["stored_key"] and again["gateway_key_works"], again
    assert request_log_rows(user) == 1

    # Remove: the program goes, the user's data stays; a reinstall finds it again.
    apt("remove", "baton")
    assert installed_version() is None and not Path("/usr/bin/baton-desktop").exists()
    assert (user["home"] / ".local/share/baton/baton.db").exists(), "apt-get remove keeps the user's data"
    apt("install", f"./{deb(VERSION).name}", cwd=DIST)
    back = step(user, "again")
    assert back["providers"] == ["homelab"] and back["stored_key"] and back["gateway_key_works"], back


def installed_version_of(name):
    p = run("dpkg-query", "-W", "-f=${Status}", name, check=False)
    return "install ok installed" in p.stdout


def test_the_rpm_declares_its_libraries_and_holds_the_same_files(tmp_path):
    rpm = next(DIST.glob(f"baton-{VERSION.replace('-', '_')}-1.*.rpm"))
    requires = run("rpm", "-qpR", str(rpm)).stdout
    for lib in ["libwebkit2gtk-4.1.so.0", "libgtk-3.so.0", "libayatana-appindicator-gtk3"]:
        assert lib in requires, f"{lib} not required:\n{requires}"
    assert "libwayland" not in run("rpm", "-qpl", str(rpm)).stdout, "no bundled Wayland libraries"
    files = run("rpm", "-qpl", str(rpm)).stdout.split()
    assert "/usr/share/licenses/baton/LICENSE" in files and "/usr/bin/baton-desktop" in files, files
    # Unpacked (rpm2cpio, as rpm itself reads the payload), the gateway binary runs.
    rpm2cpio = subprocess.Popen(["rpm2cpio", str(rpm)], stdout=subprocess.PIPE)
    subprocess.run(["cpio", "-idm", "--quiet"], stdin=rpm2cpio.stdout, cwd=tmp_path, check=True)
    assert rpm2cpio.wait() == 0
    assert run(str(tmp_path / "usr/bin/baton"), "--version").stdout.strip() == f"baton {VERSION}"


def test_the_headless_tarball_runs_and_its_example_config_checks(tmp_path):
    tar = next(DIST.glob(f"baton-{VERSION}-linux-*.tar.gz"))
    with tarfile.open(tar) as t:
        names = t.getnames()
        t.extractall(tmp_path, filter="data")
    top = tmp_path / f"baton-{VERSION}"
    assert sorted(p.name for p in top.iterdir()) == ["LICENSE", "README.md", "baton", "config.example.json"], names
    assert run(str(top / "baton"), "--version").stdout.strip() == f"baton {VERSION}"
    run(str(top / "baton"), "config", "check", str(top / "config.example.json"))
    sums = (DIST / f"SHA256SUMS-{VERSION}").read_text()
    assert tar.name in sums
    run("sha256sum", "--check", "--ignore-missing", f"SHA256SUMS-{VERSION}", cwd=DIST)
