"""verdict.md: the verdict and score, what to fix, each check's evidence, how the score was
made, and Tables 1 and 2 beside the reference.

Every string of the evidence may carry a student's text: it goes into the page only as a
code span, a fence or through names.md_text (analysis.grade.trust.names)."""

from analysis.grade import score as S
from analysis.grade.pages import fmt as F
from analysis.grade.trust import names as N


def _md_head(name: str, evidence: dict, sc: S.Score) -> list:
    word, failed, got, mx = sc.verdict, sc.failed, sc.total, sc.maximum
    failed_md = ", ".join(map(N.md_code, failed))
    out = [f"# Lab 2 grade: {N.md_code(name)}", "",
           f"**Verdict: {word}**" + (f" (failed: {failed_md})" if failed else ""),
           f"**Score: {got:g} / {mx:g}**", "",
           f"Settings: {F.settings_text(evidence)}; grading took "
           f"{F.num(evidence.get('seconds', 0), '.0f')} s.", "",
           f"Grader: {N.md_text(F.grader_text(evidence, sc.weights))}.", "",
           f"Sandbox: {N.md_text(F.sandbox_text(evidence))}", ""]
    if F.lab_text(evidence):
        out += [f"Lab: {N.md_text(F.lab_text(evidence))}", ""]
    if evidence.get("error"):
        out += [f"Grading error: {N.md_code(evidence['error'])}", ""]
    out += ["| Check | Verdict | Points |", "|---|---|---|"]
    for c in sc.checks:
        out.append(f"| {N.md_text(c['title'])} | {S.status_word(c)} | "
                   f"{c['points']:g} / {c['max_points']:g} |")
    return [*out, ""]


def _md_fix_list(items: list, indent: str = "") -> list:
    return [f"{indent}- {F.rich_md(x)}" for x in items]


def _md_fix_summary(scored: list) -> list:
    """'## What to fix': every check that did not pass, with what to change."""
    todo = [(c, c["fixes"]) for c in scored if c["status"] != "pass"]
    todo = [(c, f) for c, f in todo if f]
    if not todo:
        return []
    out = ["## What to fix", ""]
    for c, items in todo:
        head = f"- **{N.md_text(c['title'])}** ({F.word_scored(c)})"
        out += ([f"{head}: {F.rich_md(items[0])}"] if len(items) == 1
                else [f"{head}:", *_md_fix_list(items, "  ")])
    return [*out, ""]


def _md_teach(c: dict) -> list:
    """A check's status note (skipped, undetermined) and its 'What to fix' line."""
    out = [N.md_text(F.status_note(c)), ""] if F.status_note(c) else []
    items = c["fixes"]
    if len(items) == 1:
        out += [f"**What to fix:** {F.rich_md(items[0])}", ""]
    elif items:
        out += ["**What to fix:**", "", *_md_fix_list(items), ""]
    return out


def _md_check_sections(scored: list) -> list:
    out = []
    for c in scored:
        out += [f"## {N.md_text(c['title'])}: {S.status_word(c)}", ""]
        out += [f"- {N.md_code(line)}" for line in c["evidence"]]
        for ex in c.get("counterexamples", []):
            out += ["", "Counterexample:", "", N.md_fence(ex)]
        out.append("")
        out += _md_teach(c)
    return out


def _md_how(evidence: dict, sc: S.Score) -> list:
    """'## How the score was made': weights, shares earned, points, the verdict rule."""
    out = ["## How the score was made", "",
           "| Check | Verdict | Weight | Earned | Points | How it is counted |",
           "|---|---|---|---|---|---|"]
    for title, word, weight, share, pts, rule in S.how_rows(sc):
        out.append(f"| {N.md_text(title)} | {word} | {weight} | {share} | {pts} | "
                   f"{F.rich_md(rule, cell=True)} |")
    return [*out, "", N.md_text(S.score_sums(sc)), "",
            f"Verdict: {N.md_text(sc.reason)}. The rule: "
            f"{N.md_text(S.VERDICT_RULE)}", "",
            f"Weights: {N.md_code(F.weights_file(evidence, sc.weights))} (points per check; a "
            "course edits it or passes its own with `--weights FILE`).", ""]


TABLES = (("mean", "Mean"), ("median", "Median"))


def table_data(evidence: dict, ref: dict | None) -> tuple:
    """(the submission's tables, the reference's, the sizes); empty tables when none."""
    ref_t = (ref or {}).get("tables", {})
    return evidence.get("tables") or {}, ref_t, F.sizes_of(evidence), F.servers_of(evidence, ref_t)


def _md_tables(evidence: dict, ref: dict | None) -> list:
    sub_t, ref_t, sizes, servers = table_data(evidence, ref)
    if not sub_t:
        return []
    out = []
    for num, (key, what) in enumerate(TABLES, 1):
        out += [f"## Table {num}: {what} memory access latency (s), submission | reference", ""]
        head = "| Server | " + " | ".join(f"n={n} | ref n={n}" for n in sizes) + " |"
        out += [head, "|---" * (1 + 2 * len(sizes)) + "|"]
        out += ["| " + " | ".join(r) + " |"
                for r in F.table_rows(sub_t, ref_t, key, sizes, servers)]
        out.append("")
    out += ["Ranking by mean latency (fastest first):", ""]
    for n in sizes:
        out.append(f"- n={n}: submission {F.ranking(sub_t, n, servers)}; reference "
                   f"{F.ranking(ref_t, n)}")
    return [*out, ""]


def markdown(name: str, evidence: dict, ref: dict | None, sc: S.Score) -> str:
    """verdict.md: the verdict and score, what to fix, each check's evidence, how the score
    was made, Tables 1 and 2 beside the reference; sc: the grading's Score (score.of)."""
    out = _md_head(name, evidence, sc) + _md_fix_summary(sc.checks)
    out += _md_check_sections(sc.checks) + _md_how(evidence, sc)
    out += _md_tables(evidence, ref)
    return "\n".join(out)
