#!/usr/bin/env python3
"""Read every cotune result table under an output folder with pandas, polars and duckdb.

Usage: python3 scripts/read_tables.py OUT_DIR    (e.g. cotune-out/)

Each `<experiment>` entry is a link to the experiment's current generation (a hidden folder
beside it). A table is either a folder of worker parts (`<experiment>/<stage>/part-*.parquet`),
read through the link the one-line way each tool documents, or a single file such as
`<experiment>/pareto.parquet`. The tables of one experiment must all be of one step: their
footers carry one `cotune.generation`, the one `run.json` names.
For each table the three readers must agree on the row count and the column names; the footer
must carry cotune's provenance keys; `run.json` files must parse. Prints one line per table and
exits 1 if anything failed (2 on bad usage).

Needs: pip install pandas pyarrow polars duckdb
"""

import json
import sys
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow.parquet as pq

FOOTER_KEYS = ("experiment", "experiment_digest", "cotune_version", "schema_version")


def visible(path: Path) -> bool:
    return not path.name.startswith((".", "_"))


def experiments(out: Path):
    """The experiment links (or folders) of an output folder, sorted."""
    return [p for p in sorted(out.iterdir()) if visible(p) and p.is_dir()]


def find_tables(exp: Path):
    """Folder tables (those holding part-*.parquet) and single-file tables of one experiment,
    as paths through its link, sorted."""
    root = exp.resolve()
    through = lambda p: exp / p.relative_to(root)  # noqa: E731
    tables = []
    for folder in sorted({p.parent for p in root.rglob("part-*.parquet") if visible(p)}):
        tables.append(("folder", through(folder)))
    for path in sorted(root.rglob("*.parquet")):
        if visible(path) and not path.name.startswith("part-") and path.is_file():
            tables.append(("file", through(path)))
    return tables


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def read_all(kind: str, path: Path):
    """(rows, columns) as each library sees the table, read in one line each."""
    glob = str(path / "*.parquet") if kind == "folder" else str(path)
    df = pd.read_parquet(path)
    pl_df = pl.read_parquet(glob)
    relation = duckdb.sql(f"SELECT * FROM {sql_literal(glob)}")
    duck_rows = relation.fetchall()
    return {
        "pandas": (len(df), list(df.columns)),
        "polars": (pl_df.height, list(pl_df.columns)),
        "duckdb": (len(duck_rows), list(relation.columns)),
    }


def footer(kind: str, path: Path) -> dict:
    first = sorted(p for p in path.glob("*.parquet") if visible(p))[0] if kind == "folder" else path
    raw = pq.read_metadata(first).metadata or {}
    return {k.decode(): v.decode() for k, v in raw.items() if k != b"ARROW:schema"}


def check_table(kind: str, path: Path, out: Path) -> list:
    name = str(path.relative_to(out)) + ("/" if kind == "folder" else "")
    try:
        seen = read_all(kind, path)
        meta = footer(kind, path)
    except Exception as exc:  # noqa: BLE001 - report every reader failure, keep going
        print(f"FAIL {name}: {type(exc).__name__}: {exc}")
        return [name]
    problems = []
    counts = {lib: rows for lib, (rows, _) in seen.items()}
    if len(set(counts.values())) != 1:
        problems.append(f"row counts differ {counts}")
    columns = {lib: tuple(cols) for lib, (_, cols) in seen.items()}
    if len(set(columns.values())) != 1:
        problems.append(f"columns differ {columns}")
    missing = [k for k in FOOTER_KEYS if k not in meta]
    if missing:
        problems.append(f"footer lacks {missing}")
    rows, cols = seen["pandas"][0], len(seen["pandas"][1])
    status = "FAIL" if problems else "ok  "
    print(
        f"{status} {name}: {rows} rows, {cols} columns, experiment={meta.get('experiment')!r} "
        f"schema_version={meta.get('schema_version')}" + "".join(f"; {p}" for p in problems)
    )
    return [name] if problems else []


def check_run_json(path: Path, out: Path, generations: set) -> list:
    name = str(path.relative_to(out))
    try:
        summary = json.loads(path.read_text())
        named = summary.get("extra", {}).get("generation")
        if generations != {named}:
            raise ValueError(f"tables of generations {sorted(generations)}, run.json names {named!r}")
        stages = summary["stages"]
        total = {k: sum(s[k] for s in stages.values()) for k in ("executed", "cached", "failed")}
    except Exception as exc:  # noqa: BLE001
        print(f"FAIL {name}: {type(exc).__name__}: {exc}")
        return [name]
    print(f"ok   {name}: {len(stages)} stages, {total}, wall_s={summary.get('wall_s')}")
    return []


def main(argv) -> int:
    if len(argv) != 2 or not Path(argv[1]).is_dir():
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = Path(argv[1])
    tables = []
    failed = []
    for exp in experiments(out):
        mine = find_tables(exp)
        tables += mine
        for kind, path in mine:
            failed += check_table(kind, path, out)
        generations = {footer(kind, path).get("cotune.generation") for kind, path in mine}
        failed += check_run_json(exp / "run.json", out, generations)
    if not tables:
        print(f"FAIL no Parquet tables under {out}")
        return 1
    print(
        f"{len(tables)} tables read with pandas {pd.__version__}, polars {pl.__version__}, "
        f"duckdb {duckdb.__version__}: {len(failed)} failed"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
