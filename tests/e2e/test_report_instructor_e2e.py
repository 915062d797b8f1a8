"""test_report_instructor, end to end: the tests of tests/unit/test_report_instructor.py that start a child (the slow tier)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
import pytest
from classdata import synthetic_class
from browser import AVAILABLE as HAVE_CHROMIUM, MISSING as NO_CHROMIUM
from test_report_instructor import CLASSES, make  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM)
def test_the_page_renders_and_sorts_in_chromium_without_console_errors(tmp_path):
    pytest.importorskip("selenium", reason="selenium is not installed (pip install '.[test]')")
    from selenium.webdriver.common.by import By

    from test_report import browser

    m = make(tmp_path, synthetic_class(**CLASSES["lesson03"]))
    driver, profile = browser(1300, 1800)
    try:
        driver.get(m["out"].as_uri())
        assert "class report" in driver.title
        names = lambda: driver.execute_script(  # noqa: E731
            "return [...document.querySelectorAll('#students tbody tr')].map(r => r.dataset.student)")
        first = names()
        assert first == [r["student"] for r in m["page"].students]
        header = driver.find_elements(By.CSS_SELECTOR, "#students thead th")[0]
        header.click()
        assert names() == sorted(first)
        header.click()
        assert names() == sorted(first, reverse=True)
        score = driver.find_elements(By.CSS_SELECTOR, "#students thead th")[1]
        score.click()
        scores = driver.execute_script(
            "return [...document.querySelectorAll('#students tbody tr')].map(r => r.cells[1].dataset.sort)")
        assert [float(s) for s in scores] == sorted(float(s) for s in scores)
        console = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert console == []
        shot = tmp_path / "report.png"
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("COURSE_SCREENSHOTS"):  # remake the README's picture
            shutil.copy(shot, Path(__file__).resolve().parents[2] / "docs" / "images" / "report.png")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
