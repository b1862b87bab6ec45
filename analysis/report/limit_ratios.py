"""The numbers of the "Performance" report section: ratios of lockbench to the physical limit.

Input: the raw rows bench/perf.py writes (results/perf/<UTC>/runs.csv), one row per run:
  round, cell, kind ("throughput" or "lab"), server, io, client, mode ("per-request" or
  "keepalive"), delay_us, timing ("on"/"off"), delay_mode, workload, rps, p50_us, p99_us,
  errors, and for lockbench servers the summary's split (summary_mean_latency_s, ...).
Every ratio is taken between two runs of the SAME round (the rounds interleave every
configuration, so both sides saw the same machine), then the median (min..max) over the
rounds is quoted. Pure functions; the section's wording is the template's perf_ blocks
(sections/performance.py fills them), and report.py writes its files.
"""

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

# The null servers every lockbench configuration is set against (both driven by loadgen).
REFERENCES = ("nullsrv_tpc", "nullsrv_epoll")
# The split table's parts of the lab metric: (column, summary column in seconds).
SPLIT_PARTS = (("queue", "summary_mean_queue_s"), ("lock wait", "summary_mean_wait_s"),
               ("lock hold", "summary_mean_hold_s"),
               ("of which delay slept", "summary_mean_delay_s"),
               ("CPU wait (sampled)", "summary_mean_cpu_wait_s"))


@dataclass(frozen=True)
class Ratio:
    """Median and range over rounds of num/den, each pair from one round."""
    median: float
    low: float
    high: float
    rounds: int

    def text(self, digits: int = 2) -> str:
        if self.rounds == 0:
            return "n/a"
        if self.rounds == 1:
            return f"{self.median:.{digits}f}x"
        return f"**{self.median:.{digits}f}x** ({self.low:.{digits}f}-{self.high:.{digits}f})"


NO_RATIO = Ratio(float("nan"), float("nan"), float("nan"), 0)


def select(runs: pd.DataFrame, **match) -> pd.DataFrame:
    """Rows whose columns equal the given values (None matches a missing/empty value)."""
    mask = pd.Series(True, index=runs.index)
    for col, val in match.items():
        if col not in runs.columns:
            return runs.iloc[0:0]
        if val is None:
            mask &= runs[col].isna() | (runs[col].astype(str) == "")
        else:
            mask &= runs[col].astype(str) == str(val)
    return runs[mask]


def per_round(runs: pd.DataFrame, value: str = "rps", **match) -> pd.Series:
    """value per round for the matching runs (median if a round has several)."""
    rows = select(runs, **match)
    if rows.empty:
        return pd.Series(dtype="float64")
    return rows.groupby("round")[value].median()


def ratio(num: pd.Series, den: pd.Series) -> Ratio:
    """num/den paired by round; rounds missing on either side are dropped."""
    both = pd.concat([num.rename("num"), den.rename("den")], axis=1).dropna()
    both = both[both["den"] > 0]
    if both.empty:
        return NO_RATIO
    r = both["num"] / both["den"]
    return Ratio(float(r.median()), float(r.min()), float(r.max()), int(len(r)))


def lockbench_configs(runs: pd.DataFrame) -> list:
    """(server, io) pairs of the lockbench servers measured with loadgen, in order."""
    lb = runs[(runs["kind"] == "throughput") & (runs["server_kind"] == "lockbench")
              & (runs["client"] == "loadgen") & (runs["timing"] == "on")]
    seen = []
    for s, io in zip(lb["server"], lb["io"].fillna("")):
        if (s, io) not in seen:
            seen.append((s, io))
    return seen


def config_label(server: str, io: str) -> str:
    return f"{server} ({io})" if io and io != "default" else server


@dataclass(frozen=True)
class Note:
    """One remark beside a target's ratio: the template block perf_note_<block> with its
    $fields (what the section shows in brackets after the target's name)."""
    block: str
    fields: dict


@dataclass(frozen=True)
class Target:
    """key: the template block perf_target_<key> that names the target, filled with
    fields; notes: what explains the measured ratio."""
    key: str
    fields: dict
    threshold: str
    ratio: Ratio
    met: bool | None  # None: not measured
    notes: tuple = ()


def _met(r: Ratio, at_least: float | None = None, at_most: float | None = None):
    if r.rounds == 0:
        return None
    if at_least is not None:
        return r.median >= at_least
    return r.median <= at_most


CPU = "server_cpu_us_per_req"


def cpu_note(runs: pd.DataFrame, mine: dict, ref: dict) -> Note | None:
    """The server's CPU per request, reference / ours (above 1: ours needs less CPU per
    request), the load-independent view of a throughput ratio; None when not measured."""
    if CPU not in runs.columns:
        return None
    r = ratio(per_round(runs, CPU, **ref), per_round(runs, CPU, **mine))
    return Note("cpu", {"ratio": r.text()}) if r.rounds else None


def _notes(*notes) -> tuple:
    return tuple(n for n in notes if n is not None)


def targets(runs: pd.DataFrame) -> list:
    """The performance targets, each with its measured ratio (median over rounds)."""
    tp = runs[runs["kind"] == "throughput"]
    on = tp[tp["timing"] == "on"]
    return [per_request_target(on), *keepalive_targets(on), lab_target(runs),
            *timing_targets(runs), *client_targets(on)]


def per_request_target(on: pd.DataFrame) -> Target:
    """One connection per request, delay 0: the best lockbench configuration against
    nullsrv_epoll (the best, since any one I/O model reaching the reference meets it)."""
    ref = {"server": "nullsrv_epoll", "client": "loadgen", "mode": "per-request", "delay_us": 0}
    den = per_round(on, **ref)
    best, best_cfg, best_sel = NO_RATIO, "", {}
    for server, io in lockbench_configs(on):
        sel = {"server": server, "io": io, "client": "loadgen", "mode": "per-request",
               "delay_us": 0}
        r = ratio(per_round(on, **sel), den)
        if r.rounds and (best.rounds == 0 or r.median > best.median):
            best, best_cfg, best_sel = r, config_label(server, io), sel
    return Target("per_request", {}, ">= 1.0x", best, _met(best, at_least=1.0),
                  _notes(Note("best", {"config": best_cfg}) if best_cfg else None,
                         cpu_note(on, best_sel, ref) if best_sel else None))


def best_main4_keepalive(on: pd.DataFrame) -> tuple:
    """(I/O model, req/s per round) of main4 keep-alive at delay 0 with the highest median
    ((None, empty) when main4 was not measured)."""
    m4 = {}
    for server, io in lockbench_configs(on):
        if server == "main4":
            m4[io] = per_round(on, server=server, io=io, client="loadgen", mode="keepalive",
                               delay_us=0)
    best_io = max(m4, key=lambda k: m4[k].median() if len(m4[k]) else -1, default=None)
    return best_io, m4.get(best_io, pd.Series(dtype="float64"))


def keepalive_targets(on: pd.DataFrame) -> list:
    """Keep-alive, delay 0: main4 (its best I/O model) against nullsrv_tpc -k and Redis GET
    and SET."""
    best_io, m4ka = best_main4_keepalive(on)
    best = Note("best", {"config": config_label("main4", best_io)}) if best_io is not None \
        else None
    m4sel = {"server": "main4", "io": best_io, "client": "loadgen", "mode": "keepalive",
             "delay_us": 0}
    ref = {"server": "nullsrv_tpc", "client": "loadgen", "mode": "keepalive", "delay_us": 0}
    r = ratio(m4ka, per_round(on, **ref))
    out = [Target("keepalive_tpc", {}, ">= 1.0x", r, _met(r, at_least=1.0),
                  _notes(best, cpu_note(on, m4sel, ref)))]
    for op in ("GET", "SET"):
        ref = {"server": f"redis-{op.lower()}", "mode": "keepalive", "delay_us": 0}
        r = ratio(m4ka, per_round(on, **ref))
        out.append(Target("keepalive_redis", {"op": op}, ">= 1.5x", r, _met(r, at_least=1.5),
                          _notes(best, cpu_note(on, m4sel, ref))))
    return out


def lab_target(runs: pd.DataFrame) -> Target:
    """Lab metric, precise delay: the kit workload against one uncontended access, both from
    the same server run and I/O model; the target is the best I/O model's ratio."""
    lab = runs[runs["kind"] == "lab"]
    best, best_io = NO_RATIO, None
    for io in lab["io"].dropna().unique():
        sel = {"server": "main4", "io": io, "delay_mode": "precise"}
        r = ratio(per_round(lab, "summary_mean_latency_s", workload="kit", **sel),
                  per_round(lab, "summary_mean_latency_s", workload="uncontended", **sel))
        if r.rounds and (best.rounds == 0 or r.median < best.median):
            best, best_io = r, io
    return Target("lab", {}, "<= 1.2x", best, _met(best, at_most=1.2),
                  _notes(Note("best", {"config": config_label("main4", best_io)})
                         if best_io else None, *lab_split_notes(runs, best_io)))


def timing_targets(runs: pd.DataFrame) -> list:
    """What timing costs, main4 keep-alive (an A B B A block), at 100 connections always and
    at 2 when measured."""
    out = []
    for conns in (100, 2):
        cpu = timing_ratio(runs, conns, "server_cpu_us_per_req")
        tput = timing_ratio(runs, conns)
        if conns != 100 and cpu.rounds == 0 and tput.rounds == 0:
            continue
        out.append(timing_target(conns, cpu, tput))
    return out


def timing_target(conns: int, cpu: Ratio, tput: Ratio) -> Target:
    """Judged on the server's CPU per request where measured (independent of the CPU share
    the run got), else on throughput."""
    if cpu.rounds:
        return Target("timing_cpu", {"conns": conns}, "< 1.02x", cpu, cpu.median < 1.02,
                      (Note("timing_cpu", {"ratio": tput.text()}),))
    return Target("timing_throughput", {"conns": conns}, "< 1.02x", tput,
                  None if tput.rounds == 0 else tput.median < 1.02,
                  (Note("timing_throughput", {}),))


def client_targets(on: pd.DataFrame) -> list:
    """Our client against loadgen, both on nullsrv_epoll, in both modes, with what each
    client's CPU per request costs."""
    out = []
    for mode in ("per-request", "keepalive"):
        ours = {"server": "nullsrv_epoll", "client": "ours", "mode": mode, "delay_us": 0}
        theirs = {**ours, "client": "loadgen"}
        r = ratio(per_round(on, **ours), per_round(on, **theirs))
        out.append(Target("client", {"mode": mode}, ">= 1.0x", r, _met(r, at_least=1.0),
                          _notes(client_cpu_note(on, ours, theirs))))
    return out


def lab_split_notes(runs: pd.DataFrame, io) -> tuple:
    """What the kit workload's lab metric (precise delay, I/O model `io`) is made of, beside
    the uncontended one, from the split table: where the extra time goes; () when not
    measured."""
    split = split_table(runs)
    if split.empty or "CPU wait (sampled)" not in split.columns:
        return ()
    label = config_label("main4", io)
    mine = split[(split["delay mode"] == "precise") & (split["server"] == label)]
    rows = dict(mine.set_index("workload").iterrows())
    if "kit" not in rows or "uncontended" not in rows:
        return ()
    kit, alone = rows["kit"], rows["uncontended"]
    notes = [Note("lab_split", {"kit": f"{kit['lab metric']:.0f}",
                                "alone": f"{alone['lab metric']:.0f}",
                                "cpu_wait": f"{kit['CPU wait (sampled)']:.0f}",
                                "lock_wait": f"{kit['lock wait']:.0f}"})]
    if "per pause" in split.columns:
        notes.append(Note("lab_pause", {"kit": f"{kit['per pause']:.0f}",
                                        "alone": f"{alone['per pause']:.0f}"}))
    return tuple(notes)


CLIENT_CPU = "client_cpu_us_per_req"


def client_cpu_note(runs: pd.DataFrame, ours: dict, theirs: dict) -> Note | None:
    """The client's own CPU per request (user + system) beside loadgen's, medians over
    rounds, and their ratio paired by round; None when not measured (results without its
    column)."""
    if CLIENT_CPU not in runs.columns:
        return None
    mine, ref = per_round(runs, CLIENT_CPU, **ours), per_round(runs, CLIENT_CPU, **theirs)
    r = ratio(mine, ref)
    if not r.rounds:
        return None
    return Note("client_cpu", {"ours": f"{mine.median():.1f}", "loadgen": f"{ref.median():.1f}",
                               "ratio": r.text()})


def timing_ratio(runs: pd.DataFrame, conns: int = 100, value: str = "rps") -> Ratio:
    """The A B B A timing block at `conns` client connections, per round (mean of the two
    runs of each side): for "rps" the throughput with --no-timing over timing on; for a
    cost such as "server_cpu_us_per_req" timing on over off. Both: above 1 = timing costs."""
    t = runs[runs["kind"] == "timing"]
    if "conns" in t.columns:
        t = t[t["conns"].fillna(100).astype(int) == conns]
    elif conns != 100:  # results without the column measured 100 connections only
        return NO_RATIO
    if t.empty or value not in t.columns or t[value].isna().all():
        return NO_RATIO
    mean = t.groupby(["round", "timing"])[value].mean().unstack()
    if "on" not in mean or "off" not in mean:
        return NO_RATIO
    return ratio(mean["off"], mean["on"]) if value == "rps" else ratio(mean["on"], mean["off"])


def ratio_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (mode, delay, lockbench config): median req/s and its ratio to each
    reference measured with the same client (loadgen) and, at delay 0, to Redis."""
    on = runs[(runs["kind"] == "throughput") & (runs["timing"] == "on")]
    rows = []
    for mode in ("per-request", "keepalive"):
        for delay in sorted(pd.to_numeric(on["delay_us"]).unique()):
            d = int(delay)
            refs = {ref: per_round(on, server=ref, client="loadgen", mode=mode, delay_us=d)
                    for ref in REFERENCES}
            if d == 0:
                for op in ("get", "set"):
                    refs[f"redis-{op}"] = per_round(on, server=f"redis-{op}", mode=mode,
                                                    delay_us=0)
            for server, io in lockbench_configs(on):
                mine = per_round(on, server=server, io=io, client="loadgen", mode=mode,
                                 delay_us=d)
                if mine.empty:
                    continue
                row = {"mode": mode, "delay_us": d, "server": config_label(server, io),
                       "req/s": float(mine.median())}
                cpu = per_round(on, "server_cpu_us_per_req", server=server, io=io,
                                client="loadgen", mode=mode, delay_us=d) \
                    if "server_cpu_us_per_req" in on.columns else pd.Series(dtype="float64")
                row["server CPU us/req"] = float(cpu.median()) if len(cpu) else float("nan")
                for ref, den in refs.items():
                    row[f"/ {ref}"] = ratio(mine, den)
                rows.append(row)
            for ref, den in refs.items():
                if len(den):
                    sel = ({"server": ref, "client": "loadgen"} if ref in REFERENCES
                           else {"server": ref})
                    cpu = per_round(on, "server_cpu_us_per_req", mode=mode, delay_us=d,
                                    **sel) if "server_cpu_us_per_req" in on.columns \
                        else pd.Series(dtype="float64")
                    rows.append({"mode": mode, "delay_us": d, "server": f"[{ref}]",
                                 "req/s": float(den.median()),
                                 "server CPU us/req": float(cpu.median()) if len(cpu)
                                 else float("nan")})
    return pd.DataFrame(rows)


def split_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The lab metric of the lab cells and what it is made of (medians over rounds, us)."""
    lab = runs[runs["kind"] == "lab"]
    rows = []
    for (io, mode, workload), g in lab.groupby(["io", "delay_mode", "workload"], sort=False,
                                                dropna=False):
        row = {"server": config_label("main4", io if isinstance(io, str) else None),
               "delay mode": mode, "workload": workload,
               "lab metric": g.groupby("round")["summary_mean_latency_s"].median().median() * 1e6}
        for name, col in SPLIT_PARTS:
            if col in g.columns:
                row[name] = g.groupby("round")[col].median().median() * 1e6
        if "summary_mean_delay_slept_us" in g.columns:
            row["per pause"] = g.groupby("round")["summary_mean_delay_slept_us"].median().median()
        rows.append(row)
    return pd.DataFrame(rows)


def plot_throughput(ax_grid, runs: pd.DataFrame):
    """One panel per (mode, delay): median req/s per configuration, min-max whiskers,
    references in grey. ax_grid: a 2-D array of Axes (rows: mode, columns: delay)."""
    on = runs[(runs["kind"] == "throughput") & (runs["timing"] == "on")]
    delays = sorted(int(d) for d in pd.to_numeric(on["delay_us"]).unique())
    artists = []
    for i, mode in enumerate(("per-request", "keepalive")):
        for j, d in enumerate(delays[: ax_grid.shape[1]]):
            ax = ax_grid[i, j]
            g = select(on, mode=mode, delay_us=d)
            labels, med, lo, hi, colors = [], [], [], [], []
            keys = []
            for (server, io, client), _ in g.groupby(["server", "io", "client"], sort=False,
                                                      dropna=False):
                keys.append((server, io, client))
            for server, io, client in keys:
                s = per_round(g, server=server, io=io if isinstance(io, str) else None,
                              client=client)
                if s.empty:
                    continue
                io_s = io if isinstance(io, str) else ""
                name = config_label(server, io_s)
                if client != "loadgen" and not server.startswith("redis"):
                    name += f" [{client}]"
                labels.append(name)
                med.append(s.median() / 1e3)
                lo.append((s.median() - s.min()) / 1e3)
                hi.append((s.max() - s.median()) / 1e3)
                lockbench = server.startswith("main") or server.startswith("lockserver")
                colors.append("#009E73" if lockbench else "#999999")
            order = sorted(range(len(labels)),
                           key=lambda k: (colors[k] != "#009E73", labels[k]))
            labels, med, lo, hi, colors = ([v[k] for k in order]
                                           for v in (labels, med, lo, hi, colors))
            y = range(len(labels))
            artists.append(ax.barh(list(y), med, xerr=[lo, hi], color=colors, capsize=2))
            ax.set_yticks(list(y), labels)
            ax.invert_yaxis()
            ax.set_xlabel("thousand requests/s (median, min-max whiskers)")
            ax.set_title(f"{mode}, delay {d} us")
    return artists


def load_run(results_dir) -> tuple:
    """(runs, meta) of one bench/perf.py results folder (runs.csv, meta.json; either may be
    gzipped, load.raw_path)."""
    import json

    from analysis.load import raw_path, read_raw_text
    d = Path(results_dir)
    return pd.read_csv(raw_path(d / "runs.csv")), json.loads(read_raw_text(d / "meta.json"))
