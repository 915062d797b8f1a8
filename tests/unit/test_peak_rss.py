"""tests/harness.py's peak-memory readers: they see growth below an earlier, higher peak of the same process
(RUSAGE_SELF's ru_maxrss does not: it only grows, and survives exec)."""

from __future__ import annotations

from harness import peak_rss_since, peak_rss_start


def test_growth_below_an_earlier_peak_is_seen():
    big = bytearray(256 * 2**20)  # an earlier peak, touched (bytearray zero-fills)
    del big
    start = peak_rss_start()
    grown = bytearray(96 * 2**20)
    assert peak_rss_since(start) >= 90 * 2**20
    del grown


def test_no_growth_reads_small():
    start = peak_rss_start()
    assert peak_rss_since(start) < 16 * 2**20
