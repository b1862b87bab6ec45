import math

import pytest

from analysis.stats import mean_ci, t_cdf, t_ppf


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
