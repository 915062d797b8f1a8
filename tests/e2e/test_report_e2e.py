"""test_report, end to end: the tests of tests/unit/test_report.py that start a child (the slow tier)."""

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
from classdata import student_names, synthetic_class, synthetic_progress  # noqa: E402
from course_cli.classes import batch  # noqa: E402
from course_cli.main import cli  # noqa: E402
from course_cli.instructor.report import OUTLIER_GAP  # noqa: E402
from test_report import CHROMEDRIVER, CHROMIUM, browser, made  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_overview_and_histogram_match_the_results(made):
    students = made["json"]["students"]
    scores = [s["score"] for s in students.values()]
    max_score = max(s["max_score"] for s in students.values())
    ov = made["rows"].ids["overview"]
    assert int(ov["students"]) == len(students) == 40
    assert float(ov["mean-score"]) == round(sum(scores) / 40, 3)
    assert float(ov["median-score"]) == statistics.median(scores)
    assert float(ov["max-score"]) == max_score == 12
    bins = made["rows"].by["histogram"]
    assert sum(int(b["count"]) for b in bins) == 40
    for b in bins:  # one bin per point, the top score in the last
        lo, hi = float(b["lo"]), float(b["hi"])
        want = sum(lo <= s < hi or (hi == max_score and s == hi) for s in scores)
        assert int(b["count"]) == want, (lo, hi)


def test_pass_rates_match_the_results(made):
    students = made["json"]["students"]
    rows = {r["exercise"]: r for r in made["rows"].by["pass-rates"]}
    names = [e["id"] for e in next(iter(students.values()))["exercises"]]
    assert list(rows) == names
    for name in names:
        st = Counter(next(e for e in s["exercises"] if e["id"] == name)["status"] for s in students.values())
        r = rows[name]
        assert int(r["passed"]) == st["passed"] and int(r["students"]) == 40
        assert float(r["pass-rate"]) == round(st["passed"] / 40, 3)
        for status in ("failed", "not_implemented", "error", "timeout"):
            assert int(r[status.replace("_", "-")]) == st[status], (name, status)


def test_the_exercise_far_above_the_rest_is_flagged_by_the_stated_rule(made):
    students = made["json"]["students"]
    fail = {}
    for s in students.values():
        for e in s["exercises"]:
            fail.setdefault(e["id"], []).append(e["status"] != "passed")
    rate = {k: sum(v) / len(v) for k, v in fail.items()}
    want = {k for k, f in rate.items() if f - statistics.mean(x for j, x in rate.items() if j != k) >= OUTLIER_GAP}
    got = {r["exercise"] for r in made["rows"].by["outliers"]}
    assert got == want == {"MultiHeadAttention"}
    assert f"at least {OUTLIER_GAP * 100:.0f} percentage points above" in made["page"]
    assert "MultiHeadAttention" in made["output"]


def test_diagnoses_per_exercise_with_counts_and_anonymous_examples(made):
    students = made["json"]["students"]
    counts = Counter((e["id"], e["diagnosis"]) for s in students.values() for e in s["exercises"] if e["diagnosis"])
    rows = [r for r in made["rows"].by["diagnoses"] if "diagnosis" in r]
    assert rows
    per = Counter(r["exercise"] for r in rows)
    for ex, n in per.items():  # the top ones of each exercise, at most 3
        own = sorted((c for (e, _), c in counts.items() if e == ex), reverse=True)
        assert n == min(3, len(own))
        assert sorted((int(r["count"]) for r in rows if r["exercise"] == ex), reverse=True) == own[:n]
    for r in rows:
        assert int(r["count"]) == counts[(r["exercise"], r["diagnosis"])]
    undiagnosed = {r["exercise"]: int(r["undiagnosed"]) for r in made["rows"].by["diagnoses"] if "undiagnosed" in r}
    for ex, n in undiagnosed.items():
        assert n == sum(e["id"] == ex and e["status"] == "failed" and not e["diagnosis"]
                        for s in students.values() for e in s["exercises"])
    examples = made["page"].split('id="diagnoses"')[1].split("</table>")[0]
    assert "example" in examples and not any(name in examples for name in students)
    assert "/srv/course" not in examples


def test_errors_timeouts_and_the_ungraded_submission(made):
    students = made["json"]["students"]
    rows = {r["exercise"]: r for r in made["rows"].by["errors"]}
    broken = list(students)[-1]
    for ex, r in rows.items():
        st = [next(e for e in s["exercises"] if e["id"] == ex) for s in students.values()]
        grader = sum(e["status"] == "error" and e["checks"][0]["name"] == "notebook" for e in st)
        assert int(r["errors-grader"]) == grader == 1
        assert int(r["errors-code"]) == sum(e["status"] == "error" for e in st) - grader
        assert int(r["timeouts"]) == sum(e["status"] == "timeout" for e in st)
    assert [u["student"] for u in made["rows"].by["ungraded"]] == [broken]


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


@pytest.mark.slow
@pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
                    reason="Chromium and chromedriver are not installed at /usr/bin (apt-get install chromium "
                           "chromium-driver)")
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
