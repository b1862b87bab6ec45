"""The report's sentences follow the data: flip the data, the wording flips."""

import pandas as pd

from analysis.report import observe as O


def summary(means, n=(10, 1000), spread=0.01):
    """A lab summary with the given mean per server (same at every n), tight CIs."""
    rows = []
    for s, m in means.items():
        for k in n:
            rows.append({"server": s, "n": k, "runs": 10, "missing": 0, "mean_s": m,
                         "median_s": m, "std_s": 0.0, "ci_lo_s": m * (1 - spread),
                         "ci_hi_s": m * (1 + spread), "min_s": m, "max_s": m, "errors": 0})
    return pd.DataFrame(rows)


def test_winner_and_speedup_are_computed():
    s = summary({"main1": 8e-3, "main2": 4e-4, "main3": 6e-3, "main4": 2e-4})
    text = " ".join(O.observe_winners(s))
    assert "At n = 10, main4 (rwlock per string) has the lowest mean latency, 0.2 ms" in text
    assert "2.00x (1.96-2.04x) lower mean latency" in text and "do not overlap" in text
    assert "40.0x (39.2-40.8x) faster" in text
    assert "main4 < main2 < main3 < main1" in text and "same at every n" in text


def test_rwlock_verdict_follows_the_data():
    good = " ".join(O.observe_rwlock(summary({"main1": 8e-3, "main3": 4e-3}), 0.7))
    assert "pays off at 70% reads" in good and "2.00x (1.96-2.04x) faster" in good
    bad = " ".join(O.observe_rwlock(summary({"main1": 4e-3, "main3": 8e-3}), 0.7))
    assert "does not pay off" in bad and "2.00x (1.96-2.04x) slower" in bad
    same = " ".join(O.observe_rwlock(summary({"main1": 4e-3, "main3": 4.01e-3}), 0.7))
    assert "cannot be told apart" in same


def test_single_mutex_winner_is_reported_as_such():
    s = summary({"main1": 1e-3, "main2": 2e-3})
    text = " ".join(O.observe_winners(s))
    assert "main1 (one mutex) has the lowest" in text and "against the single mutex" not in text


def test_ranking_change_across_n_is_reported():
    s = pd.concat([summary({"main1": 1e-3, "main2": 2e-3}, n=(10,)),
                   summary({"main1": 2e-3, "main2": 1e-3}, n=(1000,))])
    assert any("order changes with n" in x for x in O.observe_winners(s))


def test_n_effect_and_skew():
    s = summary({"main1": 8e-3})
    at = s["n"] == 1000
    s.loc[at, ["mean_s", "ci_lo_s", "ci_hi_s"]] = [2e-3, 1.98e-3, 2.02e-3]
    text = " ".join(O.observe_n_effect(s))
    assert "main1 (one mutex) falls 4.00x (3.92-4.08x)" in text
    s.loc[s["n"] == 1000, "median_s"] = 1e-3
    assert "mean exceeds the median" in " ".join(O.observe_skew(s))


def test_saturation_still_rising_is_flagged():
    knees = pd.DataFrame([{"server": "main4", "peak_rps": 900.0, "peak_threads": 64,
                           "knee_threads": 32, "knee_rps": 850.0, "knee_p95_us": 120.0,
                           "max_threads": 64, "p95_at_max_us": 300.0}])
    text = O.observe_saturation(knees)[0]
    assert "peaks at 900 requests/s with 64 client threads" in text
    assert "may not have saturated" in text


def test_overlapping_intervals_are_ties_not_ranks():
    # main2 and main4 differ by 10% but their CIs (+-20%) overlap: a tie, not a ranking.
    s = summary({"main1": 8e-3, "main2": 2.2e-4, "main4": 2e-4}, spread=0.2)
    text = " ".join(O.observe_winners(s))
    assert "Order, fastest first: main4 ≈ main2 < main1." in text
    assert "not established (a tie)" in text and "1.10x (0.73-1.65x)" in text
    assert "(≈: the two 95% confidence intervals overlap" in text


def test_order_change_only_when_a_pair_swaps_beyond_the_spread():
    ties_differ = pd.concat([summary({"main1": 1e-3, "main2": 1.1e-3, "main3": 5e-3}, n=(10,),
                                     spread=0.2),
                             summary({"main1": 1e-3, "main2": 2e-3, "main3": 5e-3}, n=(1000,),
                                     spread=0.2)])
    text = " ".join(O.observe_winners(ties_differ))
    assert "only which of them tie changes" in text and "order changes" not in text
    swapped = pd.concat([summary({"main1": 1e-3, "main2": 2e-3}, n=(10,)),
                         summary({"main1": 2e-3, "main2": 1e-3}, n=(1000,))])
    assert any("order changes with n" in x for x in O.observe_winners(swapped))


def test_n_effect_inside_the_spread_is_no_change():
    s = summary({"main2": 1e-3}, spread=0.3)
    s.loc[s["n"] == 1000, ["mean_s", "ci_lo_s", "ci_hi_s"]] = [1.5e-3, 1.05e-3, 1.95e-3]
    text = " ".join(O.observe_n_effect(s))
    assert "does not change beyond the confidence intervals" in text
    assert "main2 (+50%, 0.81-2.79x)" in text and "rises" not in text


def sweep(points, reps):
    """A sweep summary over threads: {server: [(latency_s, lo, hi), ...]} per point."""
    rows = []
    for s, vals in points.items():
        for t, (m, lo, hi) in zip((1, 2), vals):
            rows.append({"server": s, "threads": t, "reps": reps, "summary_mean_latency_s": m,
                         "summary_mean_latency_min_s": lo, "summary_mean_latency_max_s": hi,
                         "throughput_rps": 1e3, "throughput_min_rps": 9e2,
                         "throughput_max_rps": 1.1e3})
    return pd.DataFrame(rows)


def test_sweep_order_is_in_tiers_and_swaps_only_beyond_the_spread():
    s = sweep({"main1": [(1.0, 0.9, 1.1), (1.0, 0.9, 1.1)],
               "main2": [(1.05, 1.0, 1.2), (2.0, 1.9, 2.1)]}, reps=3)
    text = O.observe_sweep_ranking(s, "threads", "number of client threads")[0]
    assert "1: main1 ≈ main2; 2: main1 < main2" in text and "only the ties change" in text
    swap = sweep({"main1": [(1.0, 0.9, 1.1), (2.0, 1.9, 2.1)],
                  "main2": [(2.0, 1.9, 2.1), (1.0, 0.9, 1.1)]}, reps=3)
    assert "order of the servers changes" in O.observe_sweep_ranking(swap, "threads", "x")[0]


def test_sweep_measured_once_gets_the_band_and_says_so():
    # One repetition: min = max, but 1.0 and 1.2 are within +-25% of each other: a tie.
    s = sweep({"main1": [(1.0, 1.0, 1.0), (1.0, 1.0, 1.0)],
               "main2": [(1.2, 1.2, 1.2), (1.2, 1.2, 1.2)]}, reps=1)
    text = O.observe_sweep_ranking(s, "threads", "x")[0]
    assert "main1 ≈ main2" in text and "(every point ran once" in text
    span = O.observe_sweep_span(s, "threads", "x")[0]
    assert "=1.00x (0.60-1.67x)" in span and "a ±25% band is assumed" in span
