//! Benchmark of the CPU SpMM kernels against the dense baseline measured in the same run.
//!
//! `cargo run --release -p kernels --bin spmm-bench -- [--targets | --full] [--threads 1,2]
//! [--reps 5] [--budget 0.1] [--dump points.csv] [--only TEXT]`
//!
//! - `--targets` (default): 3072×768×512 (or `--shapes 768x768x128,...`), the target
//!   patterns, every point of each space measured (exhaustive), plus the regret of the cost
//!   model at a budget of 10 % of the space.
//! - `--full`: BERT-like shapes 768×768, 3072×768, 768×3072, 4096×4096 with N = 128 and 512;
//!   N:M 2:4..2:32, V:N:M with V ∈ {16, 32, 64, 128}, CSR at equal sparsity; each tuned by the
//!   cost model's top `budget` fraction of the space (at least 4 points); `--shapes` replaces
//!   the shapes here too.
//!
//! `--only TEXT` keeps the patterns whose label contains TEXT (e.g. `"V:N:M 64"`).
//!
//! `--dump FILE` writes every measured point as CSV (shape, pattern, threads, parameters,
//! predicted and first-pass measured seconds; the size of the tuning's space, so that a reader
//! knows whether every point was measured; the point's best re-measured time where it was
//! re-measured, and the dense time its row's speedup divides), to study the cost model; `--rescore FILE` reads such a dump
//! and prints, per pattern, the regret of the *current* cost model at 10 % and at 8 points (the
//! quickstart's budget) and its Spearman correlation with the measurements, without measuring
//! anything, then their geometric means over the tunings. With `--calibrate-on
//! 768x768x128,...` it first fits a [`Calibration`] on a sample (`--sample 0.2` of each space's
//! points) of the dump's rows at those shapes, then scores the analytical and the calibrated
//! model on the other shapes' rows (and, marked, on those shapes' own), and reports what the
//! sample cost to measure. `--calibrate-from FILE` fits it on every row of another dump or of a
//! calibrate stage's `sample.csv` instead: the engine's own calibration replayed on a dump.
//! Where the dump holds one shape and pattern at several thread counts, their points are also
//! scored together (`t*`): the engine tunes the thread count with the other parameters, so
//! that is the regret a kernel-tune stage pays. `--picks N` prints each tuning's N best-ranked
//! points (predicted, calibrated and measured) and the rank of the measured best.
//!
//! Times are the fastest of `reps` runs after one warm-up (the machine is shared); GFLOP/s counts
//! useful FLOPs (2·nnz·N); each pattern's speedup is against the faster dense backend for the
//! same threads, measured just before the pattern and in its confirmation rounds (the best of
//! those, printed in the row's `dense` column): the 5 fastest points of each pattern are
//! re-measured in 3 rounds interleaved with dense, so that both sides of a ratio see the same
//! phases of the machine, and the row's time is the best of those re-measurements (not the
//! first pass's minimum over every point, the luckiest of hundreds of samples). (Until 2026-12-07 a row divided by the best dense seen so far in the
//! run, mixing phases: rows of one table could use dense times 2x apart.)

use std::io::Write;
use std::time::Instant;

use kernels::*;

mod rescore;

/// Large buffers on 64-byte lines, so that kernels read B where it lies without split loads
/// (see `kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

struct Opts {
    full: bool,
    threads: Vec<usize>,
    reps: usize,
    budget: f64,
    /// `--dump`: the file, created when the run starts (not while the arguments are read).
    dump: Option<String>,
    rescore: Option<String>,
    /// `--shapes` (rows, cols, n), instead of the mode's own.
    shapes: Option<Vec<(usize, usize, usize)>>,
    /// `--rescore`: shapes whose rows calibrate the model.
    calibrate_on: Vec<(usize, usize, usize)>,
    /// `--rescore`: fraction of each space the calibration samples (default 0.2).
    sample: Option<f64>,
    /// `--rescore`: a second dump whose every row calibrates the model (a calibrate stage's
    /// sample, say), scoring every tuning of the first.
    calibrate_from: Option<String>,
    /// `--rescore`: print this many best-ranked points of each tuning, and the measured best's
    /// rank.
    picks: usize,
    /// Only the patterns whose label contains this.
    only: Option<String>,
}

/// What `--help` prints (the module documentation says more).
const USAGE: &str = "\
usage: spmm-bench [--targets | --full] [--shapes RxKxN,...] [--threads 1,2] [--reps 5]
                  [--budget 0.1] [--only TEXT] [--dump points.csv]
       spmm-bench --rescore points.csv [--calibrate-on RxKxN,... [--sample 0.2]
                                         | --calibrate-from sample.csv] [--picks 8]

  --targets           (default) every point of each target pattern's space at 3072x768x512
                      (or --shapes), with the cost model's regret at a 10 % budget
  --full              BERT-like shapes, N:M 2:4..2:32, V:N:M V in 16..128, CSR; each tuned by
                      the cost model's top --budget fraction (0 < f <= 1) of its space
  --shapes LIST       shapes instead of the mode's own, ROWSxCOLSxN, comma-separated
  --threads LIST      thread counts (default 1 and 2)
  --reps N            timed runs per point after a warm-up (the fastest is kept)
  --only TEXT         only the patterns whose label contains TEXT (\"V:N:M 64\")
  --dump FILE         every measured point as CSV (shape, pattern, threads, point, predicted
                      and measured seconds)
  --rescore FILE      the current cost model's regret at 10 % and Spearman correlation on a
                      dump, measuring nothing; --calibrate-on fits a calibration on a --sample
                      of those shapes' rows first and scores both models on the other shapes
                      (and on its own, marked); --calibrate-from fits it on every row of
                      another dump, or of a calibrate stage's sample.csv from the store,
                      instead and scores every tuning; regret at 10 % and at 8 points;
                      where the dump holds several thread counts of a tuning, also their
                      points together (t*), as the engine tunes the thread count; a
                      tuning that measured part of its space (--full) is not scored
  --picks N           with --rescore: each tuning's N best-ranked points and where the
                      measured best ranks
";

fn parse_shapes(list: &str) -> Result<Vec<(usize, usize, usize)>, String> {
    list.split(',')
        .map(|t| {
            let d: Vec<usize> = t
                .split('x')
                .map(|x| x.parse().map_err(|e| format!("shape {t}: {e}")))
                .collect::<Result<_, _>>()?;
            match d.as_slice() {
                [r, k, n] if d.iter().all(|&x| x > 0) => Ok((*r, *k, *n)),
                [_, _, _] => Err(format!("shape {t}: every size must be at least 1")),
                _ => Err(format!("shape {t}: expected ROWSxCOLSxN")),
            }
        })
        .collect()
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        full: false,
        threads: vec![1, 2.min(available_cores())],
        reps: 5,
        budget: 0.1,
        dump: None,
        rescore: None,
        shapes: None,
        calibrate_on: vec![],
        sample: None,
        calibrate_from: None,
        picks: 0,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--targets" => o.full = false,
            "--full" => o.full = true,
            "--threads" => {
                o.threads = val()?
                    .split(',')
                    .map(|t| t.parse().map_err(|e| format!("--threads: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--reps" => o.reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--budget" => o.budget = val()?.parse().map_err(|e| format!("--budget: {e}"))?,
            "--rescore" => o.rescore = Some(val()?),
            "--shapes" => o.shapes = Some(parse_shapes(&val()?)?),
            "--calibrate-on" => o.calibrate_on = parse_shapes(&val()?)?,
            "--only" => o.only = Some(val()?),
            "--calibrate-from" => o.calibrate_from = Some(val()?),
            "--picks" => o.picks = val()?.parse().map_err(|e| format!("--picks: {e}"))?,
            "--sample" => o.sample = Some(val()?.parse().map_err(|e| format!("--sample: {e}"))?),
            "--dump" => o.dump = Some(val()?),
            "--help" | "-h" => {
                let _ = std::io::stdout().write_all(USAGE.as_bytes());
                std::process::exit(0);
            }
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    o.threads.dedup();
    let cores = available_cores();
    if let Some(t) = o.threads.iter().find(|&&t| t == 0 || t > cores) {
        return Err(format!(
            "--threads {t}: a thread count from 1 to this machine's {cores} core(s)"
        ));
    }
    if o.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    if !(o.budget > 0.0 && o.budget <= 1.0) {
        return Err(format!(
            "--budget {}: a fraction of the space, above 0 and at most 1",
            o.budget
        ));
    }
    if let Some(f) = o.sample.filter(|f| !(*f > 0.0 && *f <= 1.0)) {
        return Err(format!("--sample {f}: a fraction, above 0 and at most 1"));
    }
    if o.rescore.is_none()
        && (o.calibrate_from.is_some()
            || !o.calibrate_on.is_empty()
            || o.picks > 0
            || o.sample.is_some())
    {
        return Err(
            "--calibrate-on, --calibrate-from, --sample and --picks go with --rescore".into(),
        );
    }
    if o.rescore.is_some() && o.dump.is_some() {
        return Err("--dump writes a run's measurements; --rescore measures nothing".into());
    }
    if o.calibrate_from.is_some() && !o.calibrate_on.is_empty() {
        return Err("--calibrate-on and --calibrate-from exclude each other: give one".into());
    }
    Ok(o)
}

/// Fastest of `reps` runs after a warm-up: on a shared machine the minimum is the measurement
/// least disturbed by other work.
fn time(reps: usize, mut f: impl FnMut() -> Result<(), KernelError>) -> Result<f64, KernelError> {
    f()?;
    let mut ts = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        ts.push(t.elapsed().as_secs_f64());
    }
    Ok(ts.into_iter().fold(f64::INFINITY, f64::min))
}

/// Best dense time for `threads` over both backends, and each backend's time.
fn dense_best(
    rows: usize,
    cols: usize,
    n: usize,
    threads: usize,
    reps: usize,
) -> Result<(f64, f64, f64), KernelError> {
    let a = random_values(rows * cols, 1);
    let b = random_values(cols * n, 2);
    let mut c = vec![0.0; rows * n];
    let mut t = [0.0; 2];
    for (backend, slot) in t.iter_mut().enumerate() {
        let p = ParamPoint::from_pairs([("backend", backend as i64), ("threads", threads as i64)]);
        *slot = time(reps, || dense_gemm(&a, rows, cols, &b, n, &mut c, &p))?;
    }
    Ok((t[0].min(t[1]), t[0], t[1]))
}

struct Tuned {
    /// Every measured point with its predicted and measured seconds.
    points: Vec<(ParamPoint, f64, f64)>,
    /// Per point, its best time in the confirmation rounds (NaN where not re-measured).
    confirmed: Vec<f64>,
    best: f64,
    best_point: ParamPoint,
    /// The best of the first pass, which the model's regret is measured against.
    pass_best: f64,
    /// Best among the model's top `budget` fraction (only when every point was measured).
    model_best: Option<f64>,
    measured: usize,
    space: usize,
}

/// Tunes `a` for `threads`: all points of the space with that thread count (exhaustive), or the
/// cost model's top fraction.
fn tune(
    a: &SparseMatrix,
    n: usize,
    threads: usize,
    reps: usize,
    budget: f64,
    exhaustive: bool,
) -> Result<Tuned, KernelError> {
    let sig = a.signature();
    let b = random_values(a.cols() * n, 3);
    let mut c = vec![0.0; a.rows() * n];
    let mut points: Vec<ParamPoint> = cpu_space(&sig, n)
        .points()
        .into_iter()
        .filter(|p| p.0.get("threads") == Some(&(threads as i64)))
        .collect();
    let space = points.len();
    points.sort_by(|p, q| predicted_cost(&sig, n, p).total_cmp(&predicted_cost(&sig, n, q)));
    let top = ((budget * space as f64).ceil() as usize).clamp(1, space.max(1));
    let measure_n = if exhaustive {
        space
    } else {
        top.max(4).min(space)
    };
    // Measured in a shuffled order (fixed seed): in the model's order its top points would
    // always run first, in the same phase of the machine, and the regret would carry the
    // drift between phases.
    let mut order: Vec<usize> = (0..measure_n).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (measure_n as u64);
    for i in (1..order.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let mut times = vec![f64::NAN; measure_n];
    for &i in &order {
        let p = &points[i];
        times[i] = time(reps, || spmm(a, &b, n, &mut c, p))?;
    }
    let (i, &best) = times
        .iter()
        .enumerate()
        .min_by(|x, y| x.1.total_cmp(y.1))
        .ok_or_else(|| KernelError::Backend("empty space".into()))?;
    let model_best = exhaustive.then(|| times[..top].iter().copied().fold(f64::INFINITY, f64::min));
    Ok(Tuned {
        points: points
            .iter()
            .zip(&times)
            .map(|(p, &t)| (p.clone(), predicted_cost(&sig, n, p), t))
            .collect(),
        confirmed: vec![f64::NAN; measure_n],
        best,
        best_point: points[i].clone(),
        pass_best: best,
        model_best,
        measured: measure_n,
        space,
    })
}

/// Points of a tuning re-measured by [`confirm`], and the rounds they are re-measured in.
const CONFIRM_POINTS: usize = 5;
const CONFIRM_ROUNDS: usize = 3;

/// Re-measures the fastest [`CONFIRM_POINTS`] points of `t` in [`CONFIRM_ROUNDS`] rounds, each
/// after a dense measurement, keeping the fastest time of each side (`dense`: the pattern's
/// own, measured just before it), and makes the best confirmed point the tuning's best: the
/// machine's speed drifts by ±15 % over minutes, and a ratio of two times taken minutes apart
/// would carry that drift.
fn confirm(
    a: &SparseMatrix,
    n: usize,
    threads: usize,
    reps: usize,
    t: &mut Tuned,
    dense: &mut f64,
) -> Result<(), KernelError> {
    let b = random_values(a.cols() * n, 3);
    let mut c = vec![0.0; a.rows() * n];
    let mut order: Vec<usize> = (0..t.points.len()).collect();
    order.sort_by(|&i, &j| t.points[i].2.total_cmp(&t.points[j].2));
    order.truncate(CONFIRM_POINTS);
    for _ in 0..CONFIRM_ROUNDS {
        *dense = dense.min(dense_best(a.rows(), a.cols(), n, threads, reps)?.0);
        for &i in &order {
            let p = &t.points[i].0;
            let s = time(reps, || spmm(a, &b, n, &mut c, p))?;
            t.confirmed[i] = t.confirmed[i].min(s);
        }
    }
    // The row's time is the best confirmed one: the first pass's minimum over every point
    // is the luckiest of hundreds of noisy samples, where dense had a few.
    if let Some(&i) = order
        .iter()
        .min_by(|&&i, &&j| t.confirmed[i].total_cmp(&t.confirmed[j]))
    {
        t.best = t.confirmed[i];
        t.best_point = t.points[i].0.clone();
    }
    Ok(())
}

fn point_str(p: &ParamPoint) -> String {
    p.0.iter()
        .filter(|(k, _)| k.as_str() != "threads")
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn row(label: &str, a: &SparseMatrix, n: usize, t: &Tuned, dense: f64, budget: f64, waited: f64) {
    let gflops = 2.0 * a.nnz() as f64 * n as f64 / t.best / 1e9;
    let regret = t
        .model_best
        .map(|m| format!("{:>6.1}%", (m / t.pass_best - 1.0) * 100.0))
        .unwrap_or_else(|| "     -".into());
    println!(
        "  {label:<16} {:>9.1} us {:>7.1} GF/s {:>6.2}x of dense {:>9.1} us  model@{}% regret {regret}  ({}/{} pts) best: {}{}",
        t.best * 1e6,
        gflops,
        dense / t.best,
        dense * 1e6,
        (budget * 1000.0).round() / 10.0,
        t.measured,
        t.space,
        point_str(&t.best_point),
        if waited > BUSY_SHARE {
            format!("  busy ({:.0} % waiting)", 100.0 * waited)
        } else {
            String::new()
        }
    );
}

/// Creates `--dump`'s file with its header, once the arguments are known good.
fn create_dump(path: &str) -> Result<std::fs::File, String> {
    let mut f = std::fs::File::create(path).map_err(|e| format!("--dump {path}: {e}"))?;
    writeln!(
        f,
        "rows,cols,n,pattern,threads,point,predicted_s,measured_s,space,confirmed_s,dense_s"
    )
    .map_err(|e| format!("--dump {path}: {e}"))?;
    Ok(f)
}

fn run(o: &Opts, mut dump: Option<std::fs::File>) -> Result<(), KernelError> {
    println!("cpu: {}", cpu_fingerprint());
    let shapes: Vec<(usize, usize, usize)> = match (&o.shapes, o.full) {
        (Some(shapes), _) => shapes.clone(),
        (None, true) => [(768, 768), (3072, 768), (768, 3072), (4096, 4096)]
            .into_iter()
            .flat_map(|(r, k)| [128, 512].map(|n| (r, k, n)))
            .collect(),
        (None, false) => vec![(3072, 768, 512)],
    };
    for &(rows, cols, n) in &shapes {
        let mut patterns: Vec<(String, Pattern)> = Vec::new();
        let ms: &[usize] = if o.full { &[4, 8, 16, 32] } else { &[8, 16] };
        for &m in ms {
            patterns.push((format!("N:M 2:{m}"), Pattern::Nm { n: 2, m }));
            let vs: &[usize] = if o.full {
                &[16, 32, 64, 128]
            } else {
                &[16, 64, 128]
            };
            for &v in vs {
                patterns.push((format!("V:N:M {v}:2:{m}"), Pattern::Vnm { v, m }));
            }
            let sparsity = 1.0 - 2.0 / m as f64;
            patterns.push((
                format!("CSR {:.1}%", sparsity * 100.0),
                Pattern::Unstructured { sparsity },
            ));
        }
        if !o.full {
            patterns.push((
                "vector 16x1 75%".into(),
                Pattern::Vector {
                    v: 16,
                    sparsity: 0.75,
                },
            ));
        }
        if let Some(only) = &o.only {
            patterns.retain(|(label, _)| label.contains(only.as_str()));
        }
        for &threads in &o.threads {
            let (start_dense, faer, gemm) = dense_best(rows, cols, n, threads, o.reps)?;
            let (mut fastest_dense, mut slowest_dense) = (f64::INFINITY, 0.0f64);
            let mut most_waited = 0.0f64;
            let dense_gf = 2.0 * (rows * cols * n) as f64 / start_dense / 1e9;
            println!(
                "\n{rows}x{cols}x{n}, {threads} thread(s): dense at the start {:.1} us ({dense_gf:.1} GF/s; faer {:.1} us, gemm {:.1} us); each row against its own dense",
                start_dense * 1e6,
                faer * 1e6,
                gemm * 1e6
            );
            for (label, pattern) in &patterns {
                // A pattern that does not fit this shape (V = 128 over 192 rows) is skipped.
                let sig = match FormatSignature::for_pattern(pattern, rows, cols) {
                    Ok(sig) => sig,
                    Err(e) => {
                        println!("  {label:<18} skipped: {e}");
                        continue;
                    }
                };
                let a = synthetic(&sig, 7)?;
                // This pattern's dense: just before it and in its confirmation rounds.
                let (measured, waited) = cpu_wait_during(|| {
                    let mut dense = dense_best(rows, cols, n, threads, o.reps)?.0;
                    let mut t = tune(&a, n, threads, o.reps, o.budget, !o.full)?;
                    confirm(&a, n, threads, o.reps, &mut t, &mut dense)?;
                    Ok::<_, KernelError>((dense, t))
                });
                let (dense, t) = measured?;
                fastest_dense = fastest_dense.min(dense);
                slowest_dense = slowest_dense.max(dense);
                most_waited = most_waited.max(waited);
                row(label, &a, n, &t, dense, o.budget, waited);
                if let Some(f) = &mut dump {
                    for ((p, pred, meas), confirmed) in t.points.iter().zip(&t.confirmed) {
                        let confirmed = if confirmed.is_finite() {
                            format!("{confirmed:e}")
                        } else {
                            String::new()
                        };
                        let line = format!(
                            "{rows},{cols},{n},{label},{threads},{},{pred:e},{meas:e},{},{confirmed},{dense:e}",
                            point_str(p).replace(',', ";"),
                            t.space
                        );
                        writeln!(f, "{line}").map_err(|e| KernelError::Backend(e.to_string()))?;
                    }
                }
            }
            if slowest_dense > 0.0 {
                println!(
                    "  (the rows' dense times: {:.1} to {:.1} us; the spread is the machine's drift)",
                    fastest_dense * 1e6,
                    slowest_dense * 1e6
                );
            }
            if most_waited > BUSY_SHARE {
                println!(
                    "  (the machine was busy: this table's threads waited for a CPU up to {:.0} % of \
                     the time they were runnable; long products are preempted more than short ones, \
                     so the speedups of rows marked `busy` read high: measure again on a quiet machine)",
                    100.0 * most_waited
                );
            }
        }
    }
    Ok(())
}

fn main() {
    // Piped into `head`, stop quietly as other Unix tools do (Rust ignores SIGPIPE, so the
    // next print panicked with "Broken pipe").
    #[cfg(unix)]
    // SAFETY: restores the default disposition of one signal before any thread starts; no
    // handler of ours is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let opts = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("spmm-bench: {e}");
            std::process::exit(2);
        }
    };
    if let Some(path) = opts.rescore.clone() {
        if let Err(e) = rescore::rescore(
            &path,
            &opts.calibrate_on,
            opts.sample.unwrap_or(0.2),
            opts.calibrate_from.as_deref(),
            opts.picks,
        ) {
            // A dump that cannot be read or scored is bad input.
            eprintln!("spmm-bench: {e}");
            std::process::exit(2);
        }
        return;
    }
    // A dump that cannot be written is bad usage, found before anything is measured.
    let dump = match opts.dump.as_deref().map(create_dump).transpose() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("spmm-bench: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&opts, dump) {
        eprintln!("spmm-bench: {e}");
        std::process::exit(1);
    }
}
