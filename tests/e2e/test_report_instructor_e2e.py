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


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM)
def test_at_1280_px_every_column_shows_and_every_glyph_renders(tmp_path):
    """Lesson 10's ten exercises: the student table fits 1280 px with no cell cut off; the needs-help list and
    the unnamed groups are on the page; each status glyph is drawn from a font (its pixels differ from the box
    Chromium draws for a character no font has). COURSE_SCREENSHOTS=1 remakes docs/images/report-1280.png."""
    pytest.importorskip("selenium", reason="selenium is not installed (pip install '.[test]')")
    from browser import chromium

    from course_cli.instructor.report import SYMBOL

    klass = synthetic_class(n=30, lesson_id="lesson10", hard=None, realistic=True, not_submitted=1, seed=3)
    m = make(tmp_path, klass)
    driver = chromium(tmp_path / "profile", 1280, 900)
    try:
        driver.get(m["out"].as_uri())
        fit = driver.execute_script("""
            const t = document.getElementById('students');
            const cut = [...t.querySelectorAll('td, th')].filter(c => c.scrollWidth > c.clientWidth + 1)
                .map(c => c.textContent);
            const r = t.getBoundingClientRect();
            return {right: r.right, width: document.documentElement.clientWidth, cut: cut,
                    scroll: t.parentElement.scrollWidth - t.parentElement.clientWidth};""")
        assert fit["right"] <= fit["width"] and fit["scroll"] <= 0 and fit["cut"] == [], fit
        assert driver.execute_script("return document.querySelectorAll('#needs-help li').length") >= 1
        drawn = driver.execute_script("""
            const font = getComputedStyle(document.body).font;
            const px = (ch) => { const c = document.createElement('canvas'); c.width = 40; c.height = 40;
                const g = c.getContext('2d'); g.font = font; g.fillText(ch, 4, 30);
                return Array.from(g.getImageData(0, 0, 40, 40).data).join(','); };
            const box = px('\\u0378');
            return Object.fromEntries(arguments[0].map(ch => [ch, px(ch) !== box]));""",
                                      [*SYMBOL.values(), "↳", "▲", "▼"])
        assert all(drawn.values()), drawn
        driver.execute_script("document.getElementById('needs-help').scrollIntoView()")
        shot = tmp_path / "report-1280.png"
        driver.save_screenshot(str(shot))
        if os.environ.get("COURSE_SCREENSHOTS"):
            shutil.copy(shot, Path(__file__).resolve().parents[2] / "docs" / "images" / "report-1280.png")
        driver.execute_script("document.getElementById('students').scrollIntoView()")
        driver.save_screenshot(str(tmp_path / "students.png"))
        if os.environ.get("COURSE_SCREENSHOTS"):
            shutil.copy(tmp_path / "students.png",
                        Path(__file__).resolve().parents[2] / "docs" / "images" / "report-1280-students.png")
    finally:
        driver.quit()
