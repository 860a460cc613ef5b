"""The course opens in JupyterLab, and opening a notebook leaves it byte-identical.

Run by `make test-browser` (not by `make test`). It needs Debian's `chromium` and
`chromium-driver` (apt) and the `selenium` package (requirements-browser.txt);
nothing is downloaded at run time. A missing piece fails the test, never skips it.

JupyterLab serves a temporary copy of notebooks/, so the test never writes to the
checkout. Each notebook is opened, its kernel started, then it is saved from Lab
and closed: the saved file must equal the committed one byte for byte. That holds
when the stored kernelspec and language_info are what this Python's ipykernel
reports (`make outputs` stores them); on another Python, Lab rewrites
language_info.version, which test_lab_rewrites_another_pythons_version shows.
"""

from __future__ import annotations

import json
import os
import platform
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
from conftest import NOTEBOOK_DIR, NOTEBOOKS, ROOT
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

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
COPIED: dict[str, bytes] = {}  # name -> bytes of each notebook as copied for Lab
SETTLE_MS = 1500  # after the kernel is idle, let Lab apply what the kernel reported

# Open a notebook as a user would (File > Open), wait for its kernel, save (Ctrl+S),
# shut the kernel down and close the tab. Needs LabApp.expose_app_in_browser.
OPEN_SAVE_CLOSE = """
const [path, settleMs, done] = arguments;
const sleep = ms => new Promise(r => setTimeout(r, ms));
(async () => {
  const app = window.jupyterapp;
  await app.restored;
  const panel = await app.commands.execute('docmanager:open',
                                           {path, factory: 'Notebook'});
  await panel.context.ready;
  await panel.sessionContext.ready;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel) { throw new Error('no kernel was started'); }
  const info = await kernel.info;
  for (let t = 0; kernel.status !== 'idle' && t < 600; t++) { await sleep(100); }
  const status = kernel.status;
  await sleep(settleMs);
  const dirty = panel.context.model.dirty;
  app.shell.activateById(panel.id);
  await app.commands.execute('docmanager:save');
  await panel.sessionContext.shutdown();
  panel.close();
  done({status, dirty, display_name: panel.sessionContext.kernelDisplayName,
        language_info: info.language_info});
})().catch(err => done({error: String((err && err.stack) || err)}));
"""


def _notebook() -> Path:
    found = [p for p in NOTEBOOKS if p.name.startswith("01_")]
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


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Return a fresh copy of notebooks/ for Lab to serve (and write to)."""
    copy = tmp_path_factory.mktemp("course") / "notebooks"
    shutil.copytree(NOTEBOOK_DIR, copy, ignore=shutil.ignore_patterns(
        "__pycache__", ".ipynb_checkpoints"))
    COPIED.update({p.name: p.read_bytes() for p in copy.glob("*.ipynb")})
    return copy


@pytest.fixture(scope="module")
def lab(tmp_path_factory, served):
    """Start a token-less JupyterLab on a free 127.0.0.1 port; yield its base URL."""
    tmp_path = tmp_path_factory.mktemp("lab")
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
           "--ServerApp.password=", f"--ServerApp.root_dir={served}",
           "--LabApp.expose_app_in_browser=True",
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


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Start headless Debian Chromium through its matching chromedriver."""
    tmp_path = tmp_path_factory.mktemp("chromium")
    _require(CHROMIUM, "chromium")
    _require(CHROMEDRIVER, "chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    service = Service(executable_path=CHROMEDRIVER,  # no Selenium Manager download
                      log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_script_timeout(RENDER_TIMEOUT)
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


def test_notebook_01_opens_and_shows_its_title(lab, browser, served):
    path = served / _notebook().name
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


def _open_save_close(browser, lab: str, name: str) -> dict:
    """Open `name` in Lab, let its kernel start, save it, close it; say what Lab saw."""
    if not browser.current_url.startswith(f"{lab}/lab"):
        browser.get(f"{lab}/lab")
    WebDriverWait(browser, RENDER_TIMEOUT, poll_frequency=0.5).until(
        lambda d: d.execute_script("return !!window.jupyterapp"))
    result = browser.execute_async_script(OPEN_SAVE_CLOSE, name, SETTLE_MS)
    assert "error" not in result, f"{name}: {result['error']}"
    return result


def _metadata_diff(before: bytes, after: bytes) -> str:
    """Describe how two notebook files differ, top-level metadata first."""
    old, new = (json.loads(b) for b in (before, after))
    changed = {k: (old["metadata"].get(k), new["metadata"].get(k))
               for k in old["metadata"].keys() | new["metadata"].keys()
               if old["metadata"].get(k) != new["metadata"].get(k)}
    if changed:
        return f"metadata changed (stored, saved by Lab): {changed}"
    cells = [i for i, (a, b) in enumerate(zip(old["cells"], new["cells"], strict=False))
             if a != b]
    return f"cells {cells[:10]} changed" if cells else "formatting changed"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_opening_and_saving_in_lab_leaves_the_notebook_unchanged(lab, browser, served,
                                                                 notebook):
    path = served / notebook.name
    committed = COPIED[notebook.name]  # the checkout's bytes when the copy was made
    result = _open_save_close(browser, lab, notebook.name)
    assert result["status"] == "idle", f"{notebook.name}: kernel {result['status']}"
    after = path.read_bytes()
    assert after == committed, (
        f"{notebook.name} changed when opened and saved in JupyterLab "
        f"(dirty on opening: {result['dirty']}): {_metadata_diff(committed, after)}")
    assert not result["dirty"], f"{notebook.name}: Lab marked it modified on opening"


def test_lab_rewrites_another_pythons_version(lab, browser, served):
    """Why language_info.version must be this Python's: Lab rewrites it on opening."""
    source = _notebook()
    path = served / "zz_other_python.ipynb"
    nb = json.loads(source.read_bytes())
    nb["metadata"]["language_info"]["version"] = "3.0.0"
    path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    result = _open_save_close(browser, lab, path.name)
    saved = json.loads(path.read_bytes())["metadata"]["language_info"]["version"]
    assert result["dirty"], "Lab no longer marks a notebook from another Python dirty"
    assert saved == result["language_info"]["version"] == platform.python_version(), (
        f"saved version {saved!r}, kernel {result['language_info']['version']!r}")
