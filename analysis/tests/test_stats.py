import math

import pytest

from analysis.stats import (
    format_tiers,
    is_tie,
    mean_ci,
    overlap,
    rank_of,
    ratio_range,
    t_cdf,
    t_ppf,
    tiers,
)


@pytest.mark.parametrize("df,expected", [
    (1, 12.706204736174707), (2, 4.302652729749464), (4, 2.7764451051977934),
    (9, 2.2621571628540993), (99, 1.9842169515086827), (1000, 1.9623390808264078)])
def test_t_quantile_matches_tables(df, expected):
    assert t_ppf(0.975, df) == pytest.approx(expected, rel=1e-9)


def test_t_cdf_symmetry_and_inverse():
    assert t_cdf(0.0, 5) == 0.5
    assert t_cdf(-1.3, 7) == pytest.approx(1 - t_cdf(1.3, 7), abs=1e-14)
    assert t_cdf(t_ppf(0.9, 3), 3) == pytest.approx(0.9, abs=1e-12)
    assert t_ppf(0.025, 4) == pytest.approx(-t_ppf(0.975, 4))


def test_mean_ci_known_values():
    m, lo, hi = mean_ci([0.010, 0.011, 0.012])
    half = 4.302652729749464 * 0.001 / math.sqrt(3)
    assert m == pytest.approx(0.011, abs=1e-15)
    assert lo == pytest.approx(0.011 - half, rel=1e-10)
    assert hi == pytest.approx(0.011 + half, rel=1e-10)


def test_mean_ci_degenerate():
    assert mean_ci([]) [0] != mean_ci([])[0]  # nan
    m, lo, hi = mean_ci([3.0])
    assert m == 3.0 and math.isnan(lo) and math.isnan(hi)
    assert mean_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    assert mean_ci([1.0, float("nan"), 3.0])[0] == 2.0


def test_ratio_range_and_ties():
    r, lo, hi = ratio_range(10.0, (8.0, 12.0), 5.0, (4.0, 6.0))
    assert (r, lo, hi) == (2.0, 8.0 / 6.0, 3.0)
    assert not is_tie(lo, hi)
    r, lo, hi = ratio_range(5.5, (4.0, 7.0), 5.0, (4.5, 5.5))
    assert is_tie(lo, hi) and lo < 1 < hi
    r, lo, hi = ratio_range(1.0, (math.nan, math.nan), 2.0, (1.0, 3.0))
    assert r == 0.5 and math.isnan(lo) and not is_tie(lo, hi)
    assert overlap((1, 2), (2, 3)) and not overlap((1, 2), (2.1, 3))
    assert overlap((1, math.nan), (0, 5)) is None


def test_tiers_group_overlaps_with_the_leader():
    # b overlaps a (the leader); c overlaps b but not a: it starts the next tier.
    items = [("c", 3.0, 2.6, 3.4), ("a", 1.0, 0.5, 1.5), ("b", 1.4, 1.2, 2.7),
             ("d", 9.0, math.nan, math.nan)]
    t = tiers(items)
    assert t == [["a", "b"], ["c"], ["d"]]
    assert format_tiers(t) == "a ≈ b < c < d"
    assert rank_of(t) == {"a": 1, "b": 1, "c": 3, "d": 4}
    assert tiers(items, lower_is_better=False)[0] == ["d"]
    assert tiers([("x", 1.0, 0.0, 2.0), ("y", 1.0, 0.0, 2.0)]) == [["x", "y"]]
