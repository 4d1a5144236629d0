#!/usr/bin/env python3
"""Checks a `cotune report` against the Parquet it was made from (CI runs it on the quickstart).

    python3 scripts/check_report.py EXPERIMENT_DIR REPORT_DIR [--plots a,b,c] [--all-within]

- every plot named in --plots has a non-empty PNG (with the PNG signature) and SVG, and is
  inline in report.html;
- every file the page links to exists;
- every numeric cell of the trials table equals its evaluate row's (or, for front.latency_us,
  its pareto row's) value exactly, read with polars, and likewise the best-kernels table
  against kernel_best.parquet;
- with --all-within, every row of the measured-against-published table is within tolerance.
Exits 1 on the first kind of mismatch, after printing all of them.
"""
import argparse
import sys
from html.parser import HTMLParser
from pathlib import Path

import polars as pl


class Tables(HTMLParser):
    """Collects, per table id, rows of (data-key, [(data-col, data-value, text)])."""

    def __init__(self):
        super().__init__()
        self.tables, self.links, self.svgs = {}, [], 0
        self.table = self.row = self.cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table = self.tables.setdefault(a.get("id", ""), [])
        elif tag == "tr" and self.table is not None:
            self.row = (a.get("data-key", ""), [])
            self.table.append(self.row)
        elif tag == "td" and self.row is not None:
            self.cell = [a.get("data-col"), a.get("data-value"), ""]
            self.row[1].append(self.cell)
        elif tag == "a" and "href" in a:
            self.links.append(a["href"])
        elif tag == "svg":
            self.svgs += 1

    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None
        elif tag == "td":
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[2] += data


def read(path: Path) -> pl.DataFrame:
    if path.is_dir():
        parts = sorted(path.glob("*.parquet"))
        return pl.concat([pl.read_parquet(p) for p in parts], how="diagonal_relaxed") if parts else pl.DataFrame()
    return pl.read_parquet(path) if path.exists() else pl.DataFrame()


def compare(name, rows, frame, errors, other=None):
    """Each numeric cell against the frame's row of the same key (or `other` for its columns)."""
    checked = 0
    by_key = {r["key"]: r for r in frame.iter_rows(named=True)} if frame.height else {}
    for key, cells in rows:
        for col, value, text in cells:
            if value is None or col is None:
                continue
            source = other[0] if other and col in other[1] else by_key
            if col not in frame.columns and not (other and col in other[1]):
                continue  # a derived cell (ideal, of ideal)
            want = source.get(key, {}).get(col)
            if want is None or (isinstance(want, float) and want != want):
                if value != "":
                    errors.append(f"{name}: {key} {col}: page {value!r}, table has none")
            elif value == "" or float(value) != float(want):
                errors.append(f"{name}: {key} {col}: page {value!r}, table {want!r}")
            checked += 1
    return checked


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("experiment")
    ap.add_argument("report")
    ap.add_argument("--plots", default="")
    ap.add_argument("--all-within", action="store_true")
    args = ap.parse_args()
    exp, rep = Path(args.experiment), Path(args.report)
    page = Tables()
    page.feed((rep / "report.html").read_text())
    errors = []
    plots = [p for p in args.plots.split(",") if p]
    for p in plots:
        png, svg = rep / f"{p}.png", rep / f"{p}.svg"
        if not png.is_file() or png.stat().st_size < 1000 or png.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            errors.append(f"{png}: missing, empty or not a PNG")
        if not svg.is_file() or svg.stat().st_size < 1000:
            errors.append(f"{svg}: missing or empty")
    if page.svgs < len(plots):
        errors.append(f"report.html has {page.svgs} inline plots, expected at least {len(plots)}")
    for link in page.links:
        if not (rep / link).is_file():
            errors.append(f"report.html links to {link}, which is not there")
    checked = 0
    if "trials" in page.tables:
        pareto = read(exp / "pareto.parquet")
        front = ({r["key"]: r for r in pareto.iter_rows(named=True)}, {"front.latency_us"})
        checked += compare("trials", page.tables["trials"][1:], read(exp / "evaluate"), errors, front)
    if "kernels" in page.tables:
        checked += compare("kernels", page.tables["kernels"][1:], read(exp / "kernel_best.parquet"), errors)
    if args.all_within:
        rows = page.tables.get("expected", [])[1:]
        if not rows:
            errors.append("no measured-against-published table")
        for _, cells in rows:
            verdict = [c[2] for c in cells if c[0] == "verdict"]
            if verdict != ["within"]:
                errors.append(f"expected: {cells[0][2]}: {verdict}")
    for e in errors:
        print("MISMATCH", e)
    print(f"{rep / 'report.html'}: {len(plots)} plots, {checked} numeric cells equal to the Parquet, {len(errors)} problems")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
