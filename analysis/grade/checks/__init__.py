"""The checks' runners, one module per check (or a few alike): each runner is named by its
record (analysis/grade/records.py, "checks.MODULE:FUNCTION") and has one signature,
run(ctx, bin_dir, present) -> the check's record of evidence (context.check). Runners
import the records, the grading's context, measure/ and trust/; nothing below them imports
this package. evidence.py holds the evidence rule every check goes through."""
