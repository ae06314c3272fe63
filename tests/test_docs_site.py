"""The manual as a reader meets it: `mkdocs build --strict` (a broken link, a missing reference or a generator that
fails is an error), then the built site served on loopback and opened in headless Chromium (Debian's package,
driven by playwright, which downloads no browser here): the home page, a guide, the rule reference and a search,
with no console error on any, each kept as a screenshot in build/docs-screenshots/ (CI's artifacts).
"""

from __future__ import annotations

import functools
import html
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.processes  # mkdocs and Chromium run as processes

SCREENSHOTS = Path(os.environ.get("DOCS_SCREENSHOTS", ROOT / "build" / "docs-screenshots"))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    mkdocs = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    result = subprocess.run(mkdocs, cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-4000:]}"
    return out


def test_the_site_builds_strict_with_every_page_and_reference(site):
    for page in ("index.html", "getting-started/index.html", "guides/own-loop/index.html",
                 "reference/rules/index.html", "reference/cli/index.html", "reference/run-config/index.html",
                 "reference/api-kubetrain/index.html", "troubleshooting/index.html", "search/search_index.json"):
        assert (site / page).is_file(), page
    rules = (site / "reference" / "rules" / "index.html").read_text()
    from kubetrain.rules.catalog import every_rule

    assert all(f'id="{rule.code.lower()}"' in rules for rule in every_rule())
    assert "class=\"doc doc-object doc-class\"" in (site / "reference" / "api-kubetrain" / "index.html").read_text()
    for page, picture in (("concepts/how-a-job-travels", "The path of one job through the layers"),
                          ("guides/platform", "The prod cluster's platform"),
                          ("guides/resilience", "Checkpoint tiers and recovery")):
        assert f"<title>{html.escape(picture)}</title>" in (site / page / "index.html").read_text(), page


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (.ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield browser
        browser.close()


def _open(browser, url: str, errors: list[str]):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    # The only request off the site is the theme's look-up of the repository's stars and release on api.github.com
    # (repo_url): answered empty here, as a machine without the internet would leave it, so the test judges the
    # site's own pages and scripts.
    root = url.split("/", 3)[:3]
    site_root = "/".join(root) + "/"
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(site_root)
               else route.fulfill(status=200, content_type="application/json", body="{}"))
    page.on("console", lambda message: errors.append(f"console {message.type}: {message.text}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    page.on("requestfailed", lambda request: errors.append(f"request failed: {request.url}"))
    page.goto(url, wait_until="networkidle")
    return page


@pytest.mark.parametrize("path, heading", [
    ("", "kubetrain"),
    ("guides/own-loop/", "Your own loop on the runtime"),
    ("reference/rules/", "Rules"),
])
def test_a_page_opens_in_chromium_without_console_errors(browser, served, path, heading):
    errors: list[str] = []
    page = _open(browser, served + path, errors)
    assert page.locator("h1").first.inner_text().startswith(heading)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{path.strip('/').replace('/', '-') or 'home'}.png"), full_page=False)
    page.close()
    assert not errors, errors


def test_search_finds_how_to_give_a_job_a_priority(browser, served):
    errors: list[str] = []
    page = _open(browser, served, errors)
    page.keyboard.press("/")  # the theme's shortcut to the search box, as a reader would
    page.keyboard.type("priority class", delay=20)
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=15000)
    titles = " ".join(results.all_inner_texts())
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "search.png"))
    page.close()
    assert "Writing a job" in titles or "PriorityClass" in titles, titles[:500]
    assert not errors, errors
