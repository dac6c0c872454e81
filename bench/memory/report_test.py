"""Tests of the memory fill test's report arithmetic on hand-made results.

Each figure of report.py is checked against a value worked out by hand from
the issue 13 formulas; the rendering is checked to carry the figures and the
failure verdict. (One Bazel test case: Bazel's synthesized XML.)
"""

import unittest

import report

MIB = 1 << 20


def fill_result(resident, rss, samples_rss, value_bytes=64, budget_mb=64, wrong=0,
                live_bytes=-1, cache_aside=None, batch_keys=100, inserted=200):
    r = {
        "backend": "x", "budget_bytes": budget_mb * MIB, "key_bytes": 24,
        "value_bytes": value_bytes, "batch_keys": batch_keys, "inserted": inserted,
        "failed_sets": 0, "batches": 2, "fill_end": "settled", "fill_seconds": 1.0,
        "samples": [{"inserted": 50 * (i + 1), "resident": resident - i % 2,
                     "live_bytes": -1 if live_bytes < 0 else live_bytes - i % 2 * MIB,
                     "rss_bytes": b, "seconds": i} for i, b in enumerate(samples_rss)],
        "after_fill": {"resident": resident, "live_bytes": live_bytes,
                       "memory_limit_bytes": -1, "rss_bytes": rss},
        "read_back": {"sampled": 1000, "hits": 990 - wrong, "misses": 10, "wrong": wrong,
                      "failed": 0},
    }
    if cache_aside is not None:
        r["cache_aside"] = cache_aside
    return r


class FillFiguresTest(unittest.TestCase):
    def test_issue_formulas(self):
        # 100,000 keys of 24 + 64 bytes in 20 MiB of RSS, 4 MiB of it idle.
        f = report.fill_figures(fill_result(100000, 20 * MIB, [10 * MIB, 20 * MIB]),
                                idle_rss_bytes=4 * MIB, metadata_bytes=2 * MIB)
        self.assertEqual(f["user_bytes"], 8800000)
        self.assertAlmostEqual(f["user_per_rss"], 8800000 / (20 * MIB))
        self.assertAlmostEqual(f["keys_per_mib"], 5000.0)
        self.assertAlmostEqual(f["overhead_per_key"], (16 * MIB - 8800000) / 100000)
        self.assertAlmostEqual(f["rss_overhead_per_key"], (20 * MIB - 8800000) / 100000)
        self.assertAlmostEqual(f["engine_metadata_per_key"], 2 * MIB / 100000)
        self.assertAlmostEqual(f["max_rss_over_budget"], 20 / 64)
        self.assertTrue(f["read_back_ok"])

    def test_pages_a_grown_key_table_took_count_as_metadata(self):
        # 2 MiB of metadata at start-up beside 58 MiB of pages; 18 MiB of
        # pages retired by the fill's end paid for a larger key table.
        r = fill_result(100000, 60 * MIB, [60 * MIB])
        r["after_fill"]["memory_limit_bytes"] = 40 * MIB
        f = report.fill_figures(r, 4 * MIB, metadata_bytes=2 * MIB,
                                start_page_bytes=58 * MIB)
        self.assertAlmostEqual(f["engine_metadata_per_key"], 20 * MIB / 100000)
        # Without the start-up pages (an older run) the start-up figure stands.
        f = report.fill_figures(r, 4 * MIB, metadata_bytes=2 * MIB)
        self.assertAlmostEqual(f["engine_metadata_per_key"], 2 * MIB / 100000)

    def test_rss_bound_is_checked_at_every_sample(self):
        bound = report.rss_bound(64 * MIB)  # 1.05 x 64 MiB + 24 MiB = 91.2 MiB
        self.assertAlmostEqual(bound / MIB, 91.2)
        under = report.fill_figures(fill_result(10, 90 * MIB, [91 * MIB, 80 * MIB]), 0)
        self.assertTrue(under["rss_bound_held"])
        # One sample over the bound fails it, even if the final RSS is under.
        over = report.fill_figures(fill_result(10, 90 * MIB, [92 * MIB, 80 * MIB]), 0)
        self.assertFalse(over["rss_bound_held"])
        self.assertAlmostEqual(over["max_rss_over_budget"], 92 / 64)

    def test_resident_range_over_the_last_batch(self):
        # batch_keys 100, inserted 200: the samples at 150 and 200 inserted.
        f = report.fill_figures(fill_result(1000, MIB, [MIB] * 4), 0)
        self.assertEqual(f["resident_last_batch"], (999, 1000))

    def test_no_keys_gives_no_per_key_figures(self):
        f = report.fill_figures(fill_result(0, 5 * MIB, [5 * MIB]), MIB, metadata_bytes=MIB)
        self.assertIsNone(f["overhead_per_key"])
        self.assertIsNone(f["engine_metadata_per_key"])
        self.assertEqual(f["keys_per_mib"], 0)

    def test_goal_overhead_prefers_the_engine_figure_and_rejects_a_negative_one(self):
        f = report.fill_figures(fill_result(1000, 10 * MIB, [10 * MIB]), 10 * MIB,
                                metadata_bytes=MIB)
        self.assertAlmostEqual(report.overhead_for_goal(f), MIB / 1000)
        f = report.fill_figures(fill_result(1000, 10 * MIB, [10 * MIB]), 10 * MIB)
        self.assertLess(f["overhead_per_key"], 0)
        self.assertIsNone(report.overhead_for_goal(f))


class RatiosTest(unittest.TestCase):
    def figures(self, keys_per_mib):
        return {"keys_per_mib": keys_per_mib}

    def test_ratios_and_goals(self):
        r = report.keys_per_mib_ratios(
            {"furrballs": self.figures(1777), "redis": self.figures(4949),
             "memcached": self.figures(6046)}, 64)
        self.assertAlmostEqual(r["memcached"], 1777 / 6046)
        self.assertAlmostEqual(r["redis"], 1777 / 4949)
        self.assertEqual(r["goal"], 1.3)
        self.assertFalse(r["goal_met"])
        r = report.keys_per_mib_ratios(
            {"furrballs": self.figures(815), "memcached": self.figures(815)}, 1024)
        self.assertTrue(r["goal_met"])  # >= 1.0x, equality included
        self.assertIsNone(r["redis"])

    def test_no_goal_for_other_value_sizes(self):
        r = report.keys_per_mib_ratios(
            {"furrballs": self.figures(2), "memcached": self.figures(1)}, 256)
        self.assertIsNone(r["goal"])
        self.assertIsNone(r["goal_met"])
        self.assertEqual(r["memcached"], 2.0)


class SmallTest(unittest.TestCase):
    def cache_aside(self, hit, live=-1):
        return {"hit_ratio": hit, "bad_values": 0,
                "after": {"resident": 1, "live_bytes": live, "memory_limit_bytes": -1,
                          "rss_bytes": 1}}

    def test_goal_four(self):
        # Four samples; the last batch (inserted > 100) holds the last two,
        # 3.4 MiB and 2.4 MiB live of 4 MiB: a mean of 72.5%.
        fb = fill_result(100, MIB, [MIB] * 4, value_bytes=1024, budget_mb=4,
                         live_bytes=int(3.4 * MIB),
                         cache_aside=self.cache_aside(0.61, live=int(3.0 * MIB)))
        mc = fill_result(100, MIB, [MIB], value_bytes=1024, budget_mb=4,
                         cache_aside=self.cache_aside(0.65))
        s = report.small_figures(fb, mc)
        self.assertAlmostEqual(s["live_after_fill"], 0.725, places=6)
        self.assertAlmostEqual(s["live_range"][0], 0.6, places=6)
        self.assertAlmostEqual(s["live_range"][1], 0.85, places=6)
        self.assertFalse(s["live_goal_met"])
        fb["samples"][3]["live_bytes"] = int(3.4 * MIB)  # both at 85%
        s = report.small_figures(fb, mc)
        self.assertAlmostEqual(s["live_after_fill"], 0.85, places=6)
        self.assertAlmostEqual(s["live_after_reads"], 0.75, places=6)
        self.assertTrue(s["live_goal_met"])
        self.assertTrue(s["hit_goal_met"])  # 4 points behind
        mc["cache_aside"]["hit_ratio"] = 0.67
        self.assertFalse(report.small_figures(fb, mc)["hit_goal_met"])  # 6 points

    def test_a_server_that_did_not_run(self):
        s = report.small_figures(None, None)
        self.assertIsNone(s["live_goal_met"])
        self.assertIsNone(s["hit_goal_met"])
        # Furrballs refusing to start at the budget meets neither goal.
        s = report.small_figures(None, None, furrballs_error="did not start")
        self.assertFalse(s["live_goal_met"])
        self.assertFalse(s["hit_goal_met"])


def raw_run(wrong=0):
    fills = []
    for system, resident, rss, idle in [("furrballs", 262144, 148 * MIB, 146 * MIB),
                                        ("redis", 386971, 78 * MIB, 11 * MIB),
                                        ("memcached", 441472, 73 * MIB, 5 * MIB)]:
        fills.append({"system": system, "budget_mb": 64, "value_bytes": 64,
                      "idle_rss_bytes": idle, "argv": [system, "--flag"],
                      "metadata_bytes": 56 * MIB if system == "furrballs" else None,
                      "result": fill_result(resident, rss, [rss],
                                            wrong=wrong if system == "furrballs" else 0)})
    fills.append({"system": "furrballs", "budget_mb": 64, "value_bytes": 1024,
                  "error": "did not start: furrballs: server exited with 1"})
    return {"mode": "fill", "facts": {"host": "h"}, "fills": fills,
            "idle": [{"system": "furrballs", "budget_mb": 256, "rss_bytes": 508 * MIB}],
            "config": {"budget_mb": 64, "furrballs_flags": "", "key_bytes": 24,
                       "threads": 4, "depth": 32, "min_growth": 0.005, "max_batches": 10,
                       "max_seconds": 100, "sample_keys": 1000}}


class RenderTest(unittest.TestCase):
    def test_fill_report_carries_the_figures(self):
        md = report.render(raw_run())
        self.assertIn("| keys resident | 262,144 | 386,971 | 441,472 |", md)
        self.assertIn("| 64 B | 0.29 | 0.36 | ≥ 1.3× | **no** |", md)
        self.assertIn("Goal 2, idle RSS at --memory_mb=256 ≤ 16 MiB: **no** (508.0 MiB)", md)
        self.assertIn("did not start: furrballs: server exited with 1", md)
        self.assertIn("no wrong value", md)

    def test_a_wrong_value_fails_the_run(self):
        raw = raw_run(wrong=3)
        md = report.render(raw)
        self.assertIn("**The run failed:**", md)
        self.assertIn("furrballs 64 MiB 64 B: 3 wrong value(s) in the read-back", md)

    def test_small_report(self):
        raw = raw_run()
        raw["mode"] = "small"
        raw["config"].update({"small_value_bytes": 1024, "zipf_theta": 0.99,
                              "cache_aside_ops": 1000, "seed": 1})
        md = report.render(raw)
        self.assertIn("## Goal 4", md)
        self.assertIn("| 64 MiB | did not run | did not run | did not run | — | **no** | **no** |",
                      md)


if __name__ == "__main__":
    unittest.main()
