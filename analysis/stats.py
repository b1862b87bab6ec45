"""The project's statistics: the t confidence interval of a mean (Student-t quantile), the
distribution-free interval of a median (order statistics), and how the report compares
intervals (overlap, ratio ranges, tiers of ties).

Pure functions, standard library only (the project does not need scipy for one quantile).
"""

import math
import statistics
from collections.abc import Sequence


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
           + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t: the t with t_cdf(t, df) == p (bisection to ~1e-12)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the two-sided t confidence interval of the mean.

    With fewer than two values the interval is undefined and returned as (mean, nan, nan).
    """
    xs = [float(v) for v in values if not math.isnan(float(v))]
    if not xs:
        return (math.nan, math.nan, math.nan)
    m = math.fsum(xs) / len(xs)
    if len(xs) < 2:
        return (m, math.nan, math.nan)
    var = math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    half = t_ppf(0.5 + confidence / 2.0, len(xs) - 1) * math.sqrt(var / len(xs))
    return (m, m - half, m + half)


# ---- spread, ratios and ties ----------------------------------------------------------------
# A value's spread is an interval (lo, hi): the 95% CI of a mean, or the min-max range of
# repetitions. Two values whose intervals overlap are a tie: no ranking between them.

def median_ci(xs: list, alpha: float) -> tuple:
    """(low, median, high): the median and a distribution-free confidence interval for it
    at level 1 - alpha, from order statistics (binomial with p = 1/2)."""
    xs, m = sorted(xs), len(xs)
    k, tail = 0, 0.0
    while k < m // 2:
        nxt = tail + math.comb(m, k) / 2 ** m
        if nxt > alpha / 2:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return (float("-inf"), statistics.median(xs), float("inf"))
    return xs[k - 1], statistics.median(xs), xs[m - k]


SINGLE_RUN_BAND = 0.25  # assumed +-25% spread of a value measured once (no repetitions)


def overlap(a: tuple, b: tuple) -> bool | None:
    """Whether intervals a = (lo, hi) and b overlap; None if either bound is undefined."""
    if any(v is None or not math.isfinite(float(v)) for v in (*a, *b)):
        return None
    return max(a[0], b[0]) <= min(a[1], b[1])


def ratio_range(a: float, a_spread: tuple, b: float, b_spread: tuple) -> tuple:
    """(a / b, lo, hi) where lo..hi is the spread of the ratio implied by the two spreads
    (a_lo / b_hi .. a_hi / b_lo); lo and hi are nan when a spread is undefined or b's
    spread reaches zero."""
    r = a / b if b else math.nan
    (alo, ahi), (blo, bhi) = a_spread, b_spread
    if overlap(a_spread, a_spread) is None or overlap(b_spread, b_spread) is None or blo <= 0:
        return (r, math.nan, math.nan)
    return (r, alo / bhi, ahi / blo)


def is_tie(lo: float, hi: float, at: float = 1.0) -> bool:
    """A ratio whose spread lo..hi contains `at` (1 = no difference) is a tie. An undefined
    spread is not called a tie (the caller says there is no spread)."""
    return math.isfinite(lo) and math.isfinite(hi) and lo <= at <= hi


def tiers(items, lower_is_better: bool = True) -> list:
    """Ranks items (label, value, lo, hi) into tiers, best first: each tier is its leader
    (the best value not yet placed) and every later item whose interval overlaps the
    leader's. Items with an undefined interval tie with nothing. Within a tier, by value."""
    order = sorted(range(len(items)), key=lambda i: (
        items[i][1] if lower_is_better else -items[i][1], str(items[i][0])))
    out = []
    while order:
        lead = items[order[0]]
        tier = [order[0]] + [i for i in order[1:] if overlap(lead[2:4], items[i][2:4])]
        out.append([items[i][0] for i in tier])
        order = [i for i in order if i not in tier]
    return out


def format_tiers(tiers_: list, better: str = "<") -> str:
    """'a ≈ b < c': ≈ joins a tie, `better` separates tiers (best first)."""
    return f" {better} ".join(" ≈ ".join(map(str, t)) for t in tiers_)


def rank_of(tiers_: list) -> dict:
    """{label: rank} where a tier's members share the rank of its first place
    (standard competition ranking: 1, 1, 3)."""
    out, place = {}, 1
    for t in tiers_:
        for label in t:
            out[label] = place
        place += len(t)
    return out
