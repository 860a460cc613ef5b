"""The course opens: JupyterLab from this repo renders notebook 01 in a real browser.

Run by `make test-browser` (not by `make test`). It needs Debian's `chromium` and
`chromium-driver` (apt) and the `selenium` package (requirements-browser.txt);
nothing is downloaded at run time. A missing piece fails the test, never skips it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900"]
H1 = ".jp-NotebookPanel .jp-MarkdownCell .jp-RenderedMarkdown h1"
START_TIMEOUT = 90  # seconds; a loaded 2-core CI box is slow
RENDER_TIMEOUT = 120
SETTINGS = {  # JupyterLab user settings for the run, in a temporary settings dir
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false",
                                                     "checkForUpdates": False},
}
TAB = "#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel"


def _notebook() -> Path:
    found = sorted(NOTEBOOK_DIR.glob("01_*.ipynb"))
    assert found, "no notebooks/01_*.ipynb to open"
    return found[0]


def _title(path: Path) -> str:
    first = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
    assert first.startswith("# "), f"{path.name} does not start with an H1"
    return first[2:].strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _require(path: str, package: str) -> None:
    assert shutil.which(path), (
        f"{path} not found: `apt-get install -y {package}` (what .ci/run does)")


def _wait_for_server(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"JupyterLab exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"JupyterLab did not answer:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """Shut JupyterLab down gracefully (kernels too), then kill whatever is left."""
    try:
        server = psutil.Process(proc.pid)
        family = [server, *server.children(recursive=True)]  # kernels too
    except psutil.NoSuchProcess:  # it already exited (and was reaped)
        family = []
    if proc.poll() is None:
        proc.terminate()
    _, alive = psutil.wait_procs(family, timeout=20)
    for p in alive:
        p.kill()
    _, alive = psutil.wait_procs(alive, timeout=10)
    proc.wait(timeout=10)
    assert not alive, f"processes left behind: {[p.pid for p in alive]}"


@pytest.fixture
def lab(tmp_path):
    """Start a token-less JupyterLab on a free 127.0.0.1 port; yield its base URL."""
    dirs = {name: tmp_path / name for name in ("config", "runtime", "data",
                                               "settings", "workspaces", "ipython")}
    for d in dirs.values():
        d.mkdir()
    # No autosave: never write to a course notebook, even when the kernel updates
    # its metadata. No news or update checks: offline, and no toast in the shot.
    for plugin, settings in SETTINGS.items():
        path = dirs["settings"] / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(dirs["config"]),
           "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
           "JUPYTER_DATA_DIR": str(dirs["data"]),
           "JUPYTERLAB_SETTINGS_DIR": str(dirs["settings"]),
           "JUPYTERLAB_WORKSPACES_DIR": str(dirs["workspaces"]),
           "IPYTHONDIR": str(dirs["ipython"]), "JUPYTER_PLATFORM_DIRS": "1"}
    port = _free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", "--IdentityProvider.token=",
           "--ServerApp.password=", f"--ServerApp.root_dir={NOTEBOOK_DIR}",
           "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for_server(url, proc, log)
        yield url
    finally:
        _stop(proc)
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(log, ARTIFACTS / "lab_opens.log")


@pytest.fixture
def browser(tmp_path):
    """Start headless Debian Chromium through its matching chromedriver."""
    _require(CHROMIUM, "chromium")
    _require(CHROMEDRIVER, "chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    service = Service(executable_path=CHROMEDRIVER,  # no Selenium Manager download
                      log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        family = psutil.Process(service.process.pid).children(recursive=True)
        driver.quit()
        _, alive = psutil.wait_procs(family, timeout=20)
        for p in alive:
            p.kill()
        _, alive = psutil.wait_procs(alive, timeout=10)
        assert not alive, f"Chromium processes left behind: {[p.pid for p in alive]}"


def test_notebook_01_opens_and_shows_its_title(lab, browser):
    path = _notebook()
    expected = _title(path)
    before = path.read_bytes()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "lab_opens.png"
    browser.get(f"{lab}/lab/tree/{path.name}")
    try:
        h1 = WebDriverWait(browser, RENDER_TIMEOUT, poll_frequency=0.5).until(
            lambda d: next((e for e in d.find_elements(By.CSS_SELECTOR, H1)
                            if e.text.strip()), False))
        time.sleep(1)  # let the first cells' layout settle for the screenshot
        shown = h1.text.replace("¶", "").strip()  # Lab appends an anchor link
    except WebDriverException:
        browser.save_screenshot(str(ARTIFACTS / "lab_opens_failure.png"))
        raise
    assert browser.save_screenshot(str(shot)), "could not save the screenshot"
    assert shown == expected
    assert browser.find_element(By.CSS_SELECTOR, TAB).text == path.name
    assert path.read_bytes() == before, "opening the notebook must not change it"
