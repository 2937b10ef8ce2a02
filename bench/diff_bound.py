"""`runs report` and `runs export --program diff` on a Run whose two Programs hold a 50,000-line data file.

The data file's second version changes every third line, with values that repeat often but below difflib's
junk threshold: the case that made an unbounded difflib run for minutes (hours at 200,000 lines). With the
diff bound of `reports.diffs` the file is counted, not diffed. Prints the seconds of each command's work
(the report page written, the export written), the median of a few samples, against a target of 2 s each.
Needs no engine (`python bench/diff_bound.py`).
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--samples", type=int, default=3)
    args = parser.parse_args()
    sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "unit")]
    from test_export_records import large_programs_run  # the same Run the unit tests use

    from orchestrator.reports.export import ProgramForm, export_records, write_jsonl
    from orchestrator.reports.report import write_html_report

    with tempfile.TemporaryDirectory() as scratch:
        root = large_programs_run(Path(scratch) / "run", lines=args.lines)
        timings: dict[str, list[float]] = {"runs report": [], "runs export --program diff": []}
        for _ in range(args.samples):
            started = time.perf_counter()
            write_html_report(root, Path(scratch) / "report.html")
            timings["runs report"].append(time.perf_counter() - started)
            started = time.perf_counter()
            write_jsonl(export_records(root, name="run", program_form=ProgramForm.DIFF), io.StringIO())
            timings["runs export --program diff"].append(time.perf_counter() - started)
    for command, seconds in timings.items():
        value = median(seconds)
        print(f"{command}, two Programs of {args.lines} lines: {value:.2f} s (target {TARGET_S:.0f} s: "
              f"{'met' if value < TARGET_S else 'missed'})")


if __name__ == "__main__":
    main()
