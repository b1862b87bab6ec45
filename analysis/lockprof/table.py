"""What liblockprof.so wrote, read and tabled: every process's dump (lockprof/dump.py), the
lock records of them all, and the cells and the summary line of the table that `lockbench
profile` prints and `lockbench compare` shows of its profiling run. Standard library only."""

from pathlib import Path

from analysis.lockprof import dump
from analysis.text import console


def load(out: Path) -> tuple:
    """(every process's dump (a forked child writes its own), by pid, those with no lock (a
    wrapper such as timeout or env) left out unless no process has one; one line for each
    dump that cannot be used: the program may have written it, lockprof/dump.py)."""
    docs, bad = [], []
    for f in sorted(out.glob("lockprof.*.json")):
        try:
            docs.append(dump.read(f))
        except dump.BadDumpError as e:
            bad.append(f"the profile {console(f.name)} {e}: left out")
    docs.sort(key=lambda d: d["pid"])
    return [d for d in docs if d["locks"]] or docs[:1], bad


def total(rec: dict) -> int:
    return sum(rec["acquisitions"].values())


def records(docs: list) -> list:
    """All lock records, each with its pid, most acquired first."""
    out = [dict(r, pid=d["pid"]) for d in docs for r in d["locks"]]
    return sorted(out, key=lambda r: (-total(r), r["pid"], r["addr"]))


def fmt_ns(v: int) -> str:
    if v < 1000:
        return f"{v}ns"
    for unit, scale in (("us", 1e3), ("ms", 1e6)):
        if v < scale * 1000:
            return f"{v / scale:.3g}{unit}"
    return f"{v / 1e9:.3g}s"


def fmt_acq(r: dict) -> str:
    a = r["acquisitions"]
    if r["kind"] == "mutex":
        return str(a["mutex"])
    if r["kind"] == "rwlock":
        fast = f" ({r['fast_reads']} fast)" if "fast_reads" in r else ""
        return f"r {a['read']}{fast} w {a['write']}"
    return f"wait {a['wait']} sig {a['signal']} bc {a['broadcast']}"


def row(r: dict, with_pid: bool) -> list:
    locks = r["kind"] != "cond"
    n = total(r)
    cont = f"{100 * r['contended'] / n:.1f}%" if locks and n else "-"
    hold = r.get("hold_ns")
    cells = [r["kind"], r["impl"], fmt_acq(r), cont, fmt_ns(r["wait_ns"]["p50"]),
             fmt_ns(r["wait_ns"]["p99"]), fmt_ns(hold["p50"]) if hold else "-",
             fmt_ns(hold["p99"]) if hold else "-", r["site"]]
    return ([str(r["pid"])] if with_pid else []) + cells


HEADER = ["kind", "lock", "acquisitions", "contended", "wait p50", "wait p99", "hold p50",
          "hold p99", "site"]


def table_rows(recs: list, with_pid: bool) -> tuple:
    return (["pid"] if with_pid else []) + HEADER, [row(r, with_pid) for r in recs]


def summary(docs: list, recs: list) -> str:
    """One line: how many objects in how many processes, which locks served them."""
    swap = docs[0]["swap"] if docs else {"mutex": "pthread", "rwlock": "pthread"}
    untracked = sum(d.get("untracked_ops", 0) for d in docs)
    line = (f"{len(recs)} lock object(s) in {len(docs)} process(es); mutexes: "
            f"{swap['mutex']}, rwlocks: {swap['rwlock']}")
    if untracked:
        line += f"; {untracked} call(s) on objects the full table could not take"
    return line
