"""`course report`: a synthetic class of 40 submissions (results built directly, nothing graded) gives a page whose
numbers, read back from its tables' data-attributes, match what the results JSON says; the page is
self-contained, anonymises its examples, and renders in headless Chromium without console errors or requests.

`python tests/test_report.py PNG` takes a screenshot of this class's page; the README's picture is remade by
`COURSE_SCREENSHOTS=1 python -m pytest tests/test_report_instructor.py -k chromium` (a realistic class)."""

from __future__ import annotations

import json
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
from course_cli.instructor.report import MIN_FLAGGED, OUTLIER_GAP  # noqa: E402

from browser import AVAILABLE as HAVE_CHROMIUM, MISSING as NO_CHROMIUM  # noqa: E402


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


def graded(students: dict) -> dict:
    """The submissions the grader could read and run (NOT GRADED ones are counted apart)."""
    return {k: s for k, s in students.items() if s["exercises"][0]["checks"][0]["name"] not in ("notebook", "submission")}


def test_overview_and_histogram_match_the_results(made):
    students = made["json"]["students"]
    scores = [s["score"] for s in graded(students).values()]
    max_score = max(s["max_score"] for s in students.values())
    ov = made["rows"].ids["overview"]
    assert int(ov["students"]) == len(students) == 40
    assert int(ov["graded"]) == len(scores) == 39 and int(ov["not-graded"]) == 1
    assert float(ov["mean-score"]) == round(sum(scores) / 39, 3)
    assert float(ov["median-score"]) == statistics.median(scores)
    assert float(ov["max-score"]) == max_score == 12
    bins = made["rows"].by["histogram"]
    assert sum(int(b["count"]) for b in bins) == 39
    for b in bins:  # one bin per point, the top score in the last
        lo, hi = float(b["lo"]), float(b["hi"])
        want = sum(lo <= s < hi or (hi == max_score and s == hi) for s in scores)
        assert int(b["count"]) == want, (lo, hi)


def test_pass_rates_match_the_results(made):
    students = graded(made["json"]["students"])
    rows = {r["exercise"]: r for r in made["rows"].by["pass-rates"]}
    names = [e["id"] for e in next(iter(students.values()))["exercises"]]
    assert list(rows) == names
    for name in names:
        st = Counter(next(e for e in s["exercises"] if e["id"] == name)["status"] for s in students.values())
        r = rows[name]
        assert int(r["passed"]) == st["passed"] and int(r["students"]) == 39
        assert float(r["pass-rate"]) == round(st["passed"] / 39, 3)
        for status in ("failed", "not_implemented", "error", "timeout"):
            assert int(r[status.replace("_", "-")]) == st[status], (name, status)


def test_the_exercise_far_above_the_rest_is_flagged_by_the_stated_rule(made):
    from test_report_instructor import expected  # the page's rules, recomputed from the JSON

    want_class = expected(made["json"])
    rate = {k: n / want_class["graded"] for k, n in want_class["own_failures"].items()}
    want = {k for k, f in rate.items() if f - statistics.mean(x for j, x in rate.items() if j != k) >= OUTLIER_GAP
            and want_class["own_failures"][k] >= MIN_FLAGGED}
    got = {r["exercise"] for r in made["rows"].by["outliers"]}
    assert got == want == {"MultiHeadAttention"}
    assert f"at least {OUTLIER_GAP * 100:.0f} percentage points above" in made["page"]
    assert "MultiHeadAttention" in made["output"]


def test_misconception_examples_are_anonymous(made):
    examples = made["page"].split('id="misconceptions"')[1].split("</table>")[0]
    assert "example" in examples and "/srv/course" not in examples
    assert not any(f"<pre class=\"example\">{name}" in examples for name in made["json"]["students"])


def test_errors_timeouts_and_the_ungraded_submission(made):
    students = made["json"]["students"]
    rows = {r["exercise"]: r for r in made["rows"].by["errors"]}
    broken = list(students)[-1]
    for ex, r in rows.items():
        st = [next(e for e in s["exercises"] if e["id"] == ex) for s in graded(students).values()]
        assert int(r["errors-code"]) == sum(e["status"] == "error" for e in st)
        assert int(r["timeouts"]) == sum(e["status"] == "timeout" for e in st)
    assert [u["student"] for u in made["rows"].by["not-graded"]] == [broken]
    assert "not-submitted" not in made["rows"].by


def test_time_to_pass_from_the_progress_files(made):
    rows = {r["exercise"]: r for r in made["rows"].by["time-to-pass"]}
    lesson = made["json"]["lesson"]
    for ex, r in rows.items():
        secs, tries, never = [], [], 0
        for store in made["stores"].values():
            att = sorted(store["lessons"][lesson]["attempts"], key=lambda a: a["time"])
            k = next((i for i, a in enumerate(att) if a["exercises"][ex]["status"] == "passed"), None)
            if k is None:
                never += 1
            else:
                secs.append(att[k]["time"] - att[0]["time"])
                tries.append(k + 1)
        assert int(r["passed"]) == len(secs) and int(r["never"]) == never
        assert float(r["median-seconds"]) == pytest.approx(statistics.median(secs), abs=0.05)
        assert float(r["median-attempts"]) == statistics.median(tries)
    assert "broken_99" in made["page"]  # the unreadable progress file is named, not fatal


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


def test_the_page_is_self_contained(made):
    page = made["page"]
    assert made["rows"].urls == ["data:,"]  # the empty favicon: nothing else to load
    assert "<script src" not in page and "@import" not in page
    assert set(re.findall(r"url\((.)", page)) <= {"#"}  # only the SVGs' own clip paths
    assert page.count("<svg") == 3  # histogram, pass rates, time to pass: inline
    json.loads(page.split('id="report-data">')[1].split("</script>")[0])


def test_anonymous_page_names_no_student(made, tmp_path):
    out = tmp_path / "anon.html"
    r = CliRunner().invoke(cli, ["report", str(made["results"]), "--out", str(out), "--anonymous"])
    assert r.exit_code == 0
    page = out.read_text()
    assert not any(name in page for name in student_names(40))
    assert "student 40" in page  # the ungraded submission, by number


def test_bad_input_is_a_clean_error_and_a_foreign_file_is_kept(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    r = CliRunner().invoke(cli, ["report", str(bad), "--out", str(tmp_path / "r.html")])
    assert r.exit_code == 2 and "is not the JSON" in r.output and "Traceback" not in r.output
    good = tmp_path / "results.json"
    batch.write(synthetic_class(5, grader_errors=0), good)
    mine = tmp_path / "notes.html"
    mine.write_text("<p>my own notes</p>")
    r = CliRunner().invoke(cli, ["report", str(good), "--out", str(mine)], catch_exceptions=False)
    assert r.exit_code == 0
    assert (tmp_path / "notes.html.bak").read_text() == "<p>my own notes</p>"
    again = CliRunner().invoke(cli, ["report", str(good), "--out", str(mine)], catch_exceptions=False)
    assert again.exit_code == 0 and (tmp_path / "notes.html.bak").read_text() == "<p>my own notes</p>"


def browser(width: int = 1100, height: int = 900):
    """Headless Chromium, fresh profile, no background networking; logs console messages and requests."""
    import browser as chromium_driver

    profile = tempfile.mkdtemp(prefix="course-chromium-")
    return chromium_driver.chromium(Path(profile), width, height, logs=("browser", "performance")), profile


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM)
def test_the_page_renders_in_chromium_without_errors_or_requests(made, tmp_path):
    pytest.importorskip("selenium", reason="selenium is not installed (pip install '.[test]')")
    driver, profile = browser()
    try:
        driver.get("about:blank")
        driver.get_log("performance")  # drop what the browser loaded for itself at start
        driver.get(made["out"].as_uri())
        assert "class report" in driver.title
        assert driver.execute_script("return document.querySelectorAll('svg').length") == 3
        heights = driver.execute_script("return [...document.querySelectorAll('figure svg')]"
                                        ".map(s => s.getBoundingClientRect().height)")
        assert all(h > 100 for h in heights), heights  # the plots are drawn, not empty boxes
        rows = driver.execute_script("return document.querySelectorAll('#pass-rates tr[data-exercise]').length")
        assert rows == 6
        console = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert console == []
        requests = []
        for entry in driver.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg["method"] == "Network.requestWillBeSent":
                requests.append((msg["params"].get("documentURL", ""), msg["params"]["request"]["url"]))
        page_requests = [u for doc, u in requests if doc == made["out"].as_uri()]
        assert page_requests and all(u.startswith(("file:", "data:")) for u in page_requests), page_requests
        assert not [u for _, u in requests if u.startswith(("http:", "https:", "ws:", "wss:"))]
        shot = tmp_path / "report.png"
        driver.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


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
