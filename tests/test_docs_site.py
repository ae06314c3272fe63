"""The manual as a reader meets it: `mkdocs build --strict` (a broken link, a missing reference or a generator that
fails is an error), then the built site served on loopback and opened in headless Chromium (Debian's package,
driven by playwright, which downloads no browser here): the home page, a guide, the rule reference and the pages
with pictures, each in the light and the dark theme (the reader's palette toggle), with no console error on any and
every picture's text readable (WCAG AA contrast) in both, each kept as a screenshot in build/docs-screenshots/ (CI's
artifacts); and the site's search, which finds ten everyday tasks among its first three pages.
"""

from __future__ import annotations

import functools
import html
import http.server
import os
import re
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


def test_the_manuals_address_is_one_constant_that_the_site_and_the_runbook_links_read(site):
    """kubetrain.rules.sources.MANUAL is the site's site_url (its canonical links) and the root of every alert's
    runbook link in dist/, each of which lands on an anchor of the built alerts guide."""
    from kubetrain.platform.alerts import RUNBOOKS
    from kubetrain.rules.sources import MANUAL

    assert f'<link rel="canonical" href="{MANUAL}">' in (site / "index.html").read_text()
    assert RUNBOOKS.startswith(MANUAL)
    guide = site / RUNBOOKS.removeprefix(MANUAL) / "index.html"
    anchors = set(re.findall(r'id="([^"]+)"', guide.read_text()))
    links = re.findall(r"runbook_url: (\S+)", "".join(path.read_text() for path in (ROOT / "dist").rglob("*.yaml")))
    assert links
    for link in links:
        assert link.startswith(RUNBOOKS) and link.removeprefix(RUNBOOKS).lstrip("#") in anchors, link


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


# The contrast of every text of the site's pictures against what is drawn under it (the boxes' and bands' fills,
# alpha-composited over the page), as WCAG 2 defines it: the pictures are inline SVGs coloured by the theme.
CONTRAST = """() => {
  const rgba = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const luminance = (c) => { const l = c.slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2]; };
  const ratio = (a, b) => { const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05); };
  let page = rgba(getComputedStyle(document.body).backgroundColor);
  if (!page || page[3] === 0) page = [255, 255, 255, 1];
  const found = [];
  for (const svg of document.querySelectorAll('.kt-diagram svg')) {
    for (const text of svg.querySelectorAll('text')) {
      text.scrollIntoView({block: 'center'});
      const box = text.getBoundingClientRect();
      let under = page;
      for (const shape of document.elementsFromPoint(box.x + box.width / 2, box.y + box.height / 2).reverse()) {
        const fill = svg.contains(shape) && !['text', 'svg', 'line'].includes(shape.tagName)
          ? rgba(getComputedStyle(shape).fill) : null;
        if (fill) under = over(fill, under);
      }
      found.push({text: text.textContent, ratio: ratio(over(rgba(getComputedStyle(text).fill), under), under),
                  px: parseFloat(getComputedStyle(text).fontSize) * svg.getScreenCTM().a});
    }
  }
  return found;
}"""
AA = 4.5  # WCAG 2 AA for text of normal size (the pictures' text is 11-12 px)
SMALLEST_PX = 8.5  # as drawn on a 1280-px-wide window: a wide picture scrolls rather than shrink further


def _in_theme(page, theme: str) -> None:
    """The reader's own switch: the palette toggle in the header (the site opens in the light scheme here)."""
    if theme == "dark":
        page.locator('label[title="Dark theme"]').click()
        page.wait_for_function("document.body.getAttribute('data-md-color-scheme') === 'slate'")
    assert page.evaluate("document.body.getAttribute('data-md-color-scheme')") == {"light": "default",
                                                                                   "dark": "slate"}[theme]


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("path, heading, pictures", [
    ("", "kubetrain", 0),
    ("guides/own-loop/", "Your own loop on the runtime", 0),
    ("reference/rules/", "Rules", 0),
    ("concepts/how-a-job-travels/", "How a job travels", 1),
    ("guides/platform/", "The platform", 1),
    ("guides/resilience/", "Resilience", 1),
])
def test_a_page_opens_in_chromium_in_either_theme_without_console_errors_and_its_pictures_read(
        browser, served, path, heading, pictures, theme):
    errors: list[str] = []
    page = _open(browser, served + path, errors)
    _in_theme(page, theme)
    assert page.locator("h1").first.inner_text().startswith(heading)
    texts = page.evaluate(CONTRAST)
    # The picture in view where the page has one (what the screenshot is for), else the page's top.
    page.evaluate("document.querySelectorAll('.kt-diagram').forEach(d => { d.scrollLeft = 0; });"
                  "(document.querySelector('.kt-diagram') || document.body).scrollIntoView(); window.scrollBy(0, -60)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{path.strip('/').replace('/', '-') or 'home'}-{theme}.png"))
    page.close()
    assert not errors, errors
    assert (len(texts) > 0) == (pictures > 0), texts
    faint = [(t["text"], round(t["ratio"], 2)) for t in texts if t["ratio"] < AA]
    assert not faint, f"{theme}: text of the pictures below {AA}:1 contrast: {faint}"
    small = [(t["text"], round(t["px"], 1)) for t in texts if t["px"] < SMALLEST_PX]
    assert not small, f"text of the pictures drawn smaller than {SMALLEST_PX} px: {small}"


# Ten everyday tasks as a newcomer types them into the search box, and the page that answers each. Material's
# search appends a wildcard to every word, so an article ("a") also matches every title word that starts with "a"
# (Admission, Adding a kind, alerts): the phrasings are the keywords people type.
TASKS = [
    ("job priority", "guides/writing-a-job/"),
    ("fine-tune a Llama from FSx", "guides/huggingface/"),
    ("resume my own loop", "guides/own-loop/"),
    ("why synth refused", "troubleshooting/"),
    ("price a change", "guides/cost/"),
    ("add gpu node pool", "guides/platform/"),
    ("run job locally", "guides/running-locally/"),
    ("profile slow step", "guides/debugging-and-profiling/"),
    ("alert stalled run", "guides/alerts/"),
    ("model fit gpu memory", "guides/memory-fit/"),
    ("deploy argo cd", "guides/gitops/"),
    ("python function as job", "guides/function-jobs/"),
]
RESULTS = "() => [...document.querySelectorAll('.md-search-result__item > a')].map(a => a.href)"


def test_search_finds_each_everyday_task_among_its_first_three_pages(browser, served):
    """The built site's own search (its search_index.json in the theme's lunr worker), typed as a reader types:
    the page that answers each task is among the first three pages the results list."""
    errors: list[str] = []
    page = _open(browser, served, errors)
    page.keyboard.press("/")  # the theme's shortcut to the search box, as a reader would
    box = page.locator("input.md-search__input")
    missed = []
    for query, answer in TASKS:
        box.fill(query[:-1])
        box.type(query[-1])  # a key pressed: the theme searches on the reader's keystrokes
        found, stable = None, 0
        for _ in range(75):  # the results as they settle: the same list three polls running
            page.wait_for_timeout(200)
            now = page.evaluate(RESULTS)
            stable, found = (stable + 1 if now == found and now else 0), now
            if stable == 3:
                break
        pages = list(dict.fromkeys(url.removeprefix(served).split("?")[0].split("#")[0] for url in found or []))
        if answer not in pages[:3]:
            missed.append(f"{query!r}: {answer} not among {pages[:3]}")
        if query == TASKS[0][0]:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "search.png"))
    page.close()
    assert not missed, missed
    assert not errors, errors
