//! Compares the fronts of two runs of one space (a grid and a unified search, say) from their
//! `evaluate` tables, with one reference point: the dense model's accuracy less 0.1, its
//! latency at the batch size and its weight bytes (the first run's dense evaluation; run both
//! on one store so that the trials they share carry the same measurements). Each model's
//! latency is that dense latency divided by the model's paired speedup over its own dense pass
//! (as the search and the Pareto front compare them), so that the machine's drift between two
//! evaluations does not move the fronts.
//!
//! `cargo run --release -p pipeline --example search_compare -- OUT GRID UNIFIED [BATCH]`
//! (OUT: the runs' `--out` folder, `cotune-out` by default; GRID and UNIFIED: experiment names)
//! prints both fronts side by side, both hypervolumes and their ratio, the fine-tune epochs
//! each spent, and whether the second front weakly dominates every point of the first.

use pipeline::search::front::{front, hypervolume, Objectives, Reference, ACCURACY_MARGIN};
use results::{Row, Value};
use std::path::Path;

fn num(r: &Row, c: &str) -> Option<f64> {
    match r.get(c) {
        Some(Value::F64(x)) => Some(*x),
        Some(Value::I64(x)) => Some(*x as f64),
        _ => None,
    }
}

fn text(r: &Row, c: &str) -> String {
    match r.get(c) {
        Some(Value::Str(s)) => s.clone(),
        Some(Value::I64(x)) => x.to_string(),
        Some(Value::F64(x)) => format!("{x}"),
        Some(Value::ListStr(l)) => l.join(" "),
        _ => String::new(),
    }
}

fn label(r: &Row) -> String {
    let per_layer = text(r, "prune.layer_patterns");
    let pattern = match text(r, "prune.pattern").as_str() {
        "dense" => "dense".to_string(),
        "nm" => format!("{}:{}", text(r, "prune.n"), text(r, "prune.m")),
        "vnm" => format!("{}:2:{}", text(r, "prune.v"), text(r, "prune.m")),
        "vector" => format!("{}x1 {}", text(r, "prune.v"), text(r, "prune.sparsity")),
        p => format!("{p} {}", text(r, "prune.sparsity")),
    };
    let method = text(r, "prune.method");
    // A unified search's rows name every layer's pattern; a grid's name the trial's.
    if per_layer.is_empty() {
        format!("{pattern} {method}")
    } else {
        format!("[{per_layer}] {method}")
    }
}

struct Run {
    rows: Vec<Row>,
    objectives: Vec<Objectives>,
    epochs: f64,
}

fn load(out: &Path, name: &str, batch: u64, dense_us: Option<f64>) -> Result<Run, String> {
    let missing = |e: results::ResultsError| {
        format!(
            "no results of experiment `{name}` in {} ({e}): run it with `cotune run … --out {}` first",
            out.display(),
            out.display()
        )
    };
    let dir = results::current(out, name).map_err(missing)?;
    let rows: Vec<Row> = results::read_table(&dir.join("evaluate"))
        .map_err(|e| format!("the evaluate table of `{name}`: {e}"))?
        .into_iter()
        .filter(|r| text(r, "status") == "ok" && text(r, "evaluate.backend") == "cpu")
        .collect();
    let objectives = rows
        .iter()
        .map(|r| {
            let raw = num(r, &format!("latency_us_b{batch}")).unwrap_or(f64::INFINITY);
            let paired = num(r, &format!("speedup_vs_dense_b{batch}"))
                .zip(dense_us)
                .map(|(s, d)| d / s);
            Objectives {
                accuracy: num(r, "accuracy").unwrap_or(0.0),
                latency_us: paired.unwrap_or(raw),
                weight_bytes: num(r, "weight_bytes").unwrap_or(f64::INFINITY),
            }
        })
        .collect();
    let epochs = rows
        .iter()
        .filter_map(|r| num(r, "prune.finetune_epochs"))
        .sum();
    Ok(Run {
        rows,
        objectives,
        epochs,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: search_compare OUT GRID_EXPERIMENT UNIFIED_EXPERIMENT [BATCH]");
        eprintln!("  OUT: the runs' --out folder (cotune-out by default)");
        std::process::exit(2);
    }
    if let Err(e) = compare(&args) {
        eprintln!("search_compare: {e}");
        std::process::exit(2);
    }
}

fn compare(args: &[String]) -> Result<(), String> {
    let out = Path::new(&args[1]);
    let batch: u64 = match args.get(4) {
        Some(b) => b
            .parse()
            .map_err(|_| format!("BATCH `{b}` is not a batch size"))?,
        None => 256,
    };
    // The first run's dense evaluation's own dense pass: the one latency all are scaled to.
    let dense_us = load(out, &args[2], batch, None)?
        .rows
        .iter()
        .find(|r| text(r, "prune.pattern") == "dense")
        .and_then(|r| num(r, &format!("dense_latency_us_b{batch}")));
    let (a, b) = (
        load(out, &args[2], batch, dense_us)?,
        load(out, &args[3], batch, dense_us)?,
    );
    let dense = a
        .rows
        .iter()
        .position(|r| text(r, "prune.pattern") == "dense")
        .ok_or_else(|| format!("`{}` evaluated no dense model: put it first", args[2]))?;
    let d = a.objectives[dense];
    let reference = Reference {
        accuracy: d.accuracy - ACCURACY_MARGIN,
        latency_us: d.latency_us,
        weight_bytes: d.weight_bytes,
    };
    println!(
        "reference point: accuracy {:.4} (dense {:.4} less {ACCURACY_MARGIN}), latency {:.1} µs at batch {batch}, weight bytes {:.0} (the dense model of {})",
        reference.accuracy, d.accuracy, reference.latency_us, reference.weight_bytes, args[2]
    );
    let mut hv = vec![];
    let mut fronts = vec![];
    for (name, run) in [(&args[2], &a), (&args[3], &b)] {
        let f = front(&run.objectives);
        let gains: Vec<[f64; 3]> = f
            .iter()
            .map(|&i| reference.gains(&run.objectives[i]))
            .collect();
        let v = hypervolume(&gains);
        println!(
            "\n{name}: {} evaluated, {} fine-tune epochs, front {} point(s), hypervolume {v:.6}",
            run.rows.len(),
            run.epochs,
            f.len()
        );
        let mut sorted = f.clone();
        sorted.sort_by(|&x, &y| {
            run.objectives[x]
                .latency_us
                .total_cmp(&run.objectives[y].latency_us)
        });
        for i in sorted {
            let o = run.objectives[i];
            println!(
                "  {:<60} accuracy {:.4}  latency {:>9.1} µs  speedup {:.3}  bytes {:>8.0}",
                label(&run.rows[i]),
                o.accuracy,
                o.latency_us,
                d.latency_us / o.latency_us,
                o.weight_bytes
            );
        }
        hv.push(v);
        fronts.push(f);
    }
    println!(
        "\nhypervolume ratio {} / {} = {:.4}; fine-tune epochs {} / {} = {:.3}",
        args[3],
        args[2],
        hv[1] / hv[0],
        b.epochs,
        a.epochs,
        b.epochs / a.epochs.max(1.0)
    );
    let covered = fronts[0].iter().filter(|&&i| {
        let p = a.objectives[i];
        fronts[1].iter().any(|&j| {
            let q = b.objectives[j];
            q.accuracy >= p.accuracy
                && q.latency_us <= p.latency_us
                && q.weight_bytes <= p.weight_bytes
        })
    });
    println!(
        "{} of {} points of {}'s front are weakly dominated by {}'s front",
        covered.count(),
        fronts[0].len(),
        args[2],
        args[3]
    );
    Ok(())
}
