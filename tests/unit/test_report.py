"""`course report`: a synthetic class of 40 submissions (results built directly, nothing graded) gives a page whose
numbers, read back from its tables' data-attributes, match what the results JSON says; the page is
self-contained, anonymises its examples, and renders in headless Chromium without console errors or requests.

`python tests/test_report.py docs/images/report.png` remakes the README's screenshot."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1]))
from classdata import student_names, synthetic_class, synthetic_progress  # noqa: E402

from course_cli.classes import batch  # noqa: E402
from course_cli.main import cli  # noqa: E402
from course_cli.instructor.report import OUTLIER_GAP  # noqa: E402

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


class Rows(HTMLParser):
    """Every element carrying data-attributes, grouped by the id of the table or list it sits in; and every
    URL the page would load."""

    def __init__(self):
        super().__init__()
        self.stack, self.by, self.urls, self.ids = [], {}, [], {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in ("br", "meta", "link", "img", "input", "hr"):
            self.stack.append(a.get("id"))
        if a.get("id"):
            self.ids[a["id"]] = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
        data = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
        if data and not a.get("id"):
            owner = next((i for i in reversed(self.stack[:-1]) if i), None)
            self.by.setdefault(owner, []).append(data)
        for k in ("src", "href", "action", "poster", "data"):
            if k in a and tag != "svg":
                self.urls.append(a[k])

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    klass = synthetic_class(40)
    results = tmp / "results.json"
    batch.write(klass, results)
    progress = tmp / "collected"
    stores = synthetic_progress(klass)
    for student, store in stores.items():
        (progress / student / ".course").mkdir(parents=True)
        (progress / student / ".course" / "progress.json").write_text(json.dumps(store))
    (progress / "broken_99").mkdir()
    (progress / "broken_99" / "progress.json").write_text("{ not json")
    out = tmp / "report.html"
    r = CliRunner().invoke(cli, ["report", str(results), "--out", str(out), "--progress", str(progress)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    parsed = Rows()
    parsed.feed(page)
    return {"json": json.loads(results.read_text()), "page": page, "rows": parsed, "out": out, "stores": stores,
            "results": results, "progress": progress, "output": r.output}


def test_time_to_pass_skips_stores_of_another_shape():
    from course_cli.instructor.report import time_to_pass

    good = {"lessons": {"lesson01": {"attempts": [
        {"time": 100.0, "exercises": {"softmax": {"status": "failed"}}},
        {"time": 400.0, "exercises": {"softmax": {"status": "passed"}}}]}}}
    odd = [{"lessons": {"lesson01": {"attempts": [{"time": "soon", "exercises": {}}]}}},
           {"lessons": {"lesson01": {"attempts": [{"time": 1.0, "exercises": ["softmax"]}]}}},
           {"lessons": {"lesson01": []}}, {"lessons": []}]
    stores = {"a": good, **{f"odd{i}": o for i, o in enumerate(odd)}}
    (row,) = time_to_pass(stores, "lesson01", ["softmax"])
    assert row["passed"] == 1 and row["never"] == 0
    assert row["median_seconds"] == 300.0 and row["median_attempts"] == 2


def browser(width: int = 1100, height: int = 900):
    """Headless Chromium, fresh profile, no background networking; logs console messages and requests."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="course-chromium-")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                f"--window-size={width},{height}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    return driver, profile


def screenshot(path: Path) -> None:
    """The README's picture: the synthetic class's report, top of the page."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        klass = synthetic_class(40)
        batch.write(klass, tmp / "results.json")
        for student, store in synthetic_progress(klass).items():
            (tmp / "p" / student).mkdir(parents=True)
            (tmp / "p" / student / "progress.json").write_text(json.dumps(store))
        from course_cli.instructor.report import write_report

        write_report(tmp / "results.json", tmp / "report.html", tmp / "p")
        driver, profile = browser(1000, 1500)
        try:
            driver.get((tmp / "report.html").as_uri())
            driver.save_screenshot(str(path))
        finally:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    screenshot(Path(sys.argv[1]))
