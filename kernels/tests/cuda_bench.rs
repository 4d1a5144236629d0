//! The device benchmark `scripts/device-check.sh` runs: V:N:M on sparse tensor cores against
//! cuBLAS fp16 on the BERT-base shapes, every configuration of the kernel measured per point
//! (exhaustive tuning), the winner checked against cuBLAS on the same matrix. Ignored by
//! default; run with `--ignored bench_`. Writes `$COTUNE_BENCH_OUT/bench.csv` (every
//! measurement) and `summary.csv`, and prints a compact table last.
//!
//! Environment: `COTUNE_BENCH_OUT` (folder, default `target/cuda-bench`), `COTUNE_BENCH_N`
//! (comma-separated batch-token counts, default `4096,16384`), `COTUNE_BENCH_QUICK=1` (one
//! shape, one M, a few configurations: the smoke run). The Hopper kernel's benchmark is
//! `cuda_bench_wgmma.rs`.
#![cfg(feature = "cuda")]

mod bench_support;

use std::fmt::Write as _;
use std::time::Instant;

use bench_support::{
    csv, cublas_point, env_list, prepare_all, reference, rel_err, setup, Row, Setup, BATCH, REPS,
    SETS, WARMUP,
};
use kernels::cuda::{
    csr_configs, exact_values, random_csr, random_vnm, vnm_configs, Gpu, VnmConfig,
};

#[test]
#[ignore = "device benchmark: run by scripts/device-check.sh"]
fn bench_vnm_vs_cublas_bert() {
    let Setup {
        dev,
        quick,
        out,
        ns,
        shapes,
    } = setup("bench_vnm_vs_cublas_bert", (768, 768));
    let ms: Vec<usize> = if quick {
        vec![8]
    } else {
        env_list("COTUNE_BENCH_M", &[4, 8, 10, 16, 20, 32, 40])
    };
    let vs: Vec<usize> = if quick { vec![64] } else { vec![64, 128] };

    let mut configs: Vec<VnmConfig> = vs.iter().flat_map(|&v| vnm_configs(v)).collect();
    if quick {
        configs.retain(|c| c.stages == 3 && c.bn == 128);
    }
    let t0 = Instant::now();
    prepare_all(&dev, &configs).unwrap();
    eprintln!(
        "compiled {} configurations in {:.1} s",
        configs.len(),
        t0.elapsed().as_secs_f64()
    );

    let mut rows: Vec<Row> = Vec::new();
    let mut summary = String::from(
        "rows,cols,n,m,cublas_us,best_us,speedup,ideal,fraction_of_ideal,v,config,rel_err\n",
    );
    let mut cublas = std::collections::BTreeMap::new();
    let mut table = Vec::new();
    for &(r, k) in &shapes {
        for &n in &ns {
            let (bs, mut cs, baseline) = cublas_point(&dev, (r, k, n));
            cublas.insert((r, k, n), baseline.t.median_us);
            rows.push(baseline);
            for &m in &ms {
                let mut best: Option<(f64, VnmConfig, usize)> = None;
                let mut best_err = None;
                for &v in &vs {
                    if r % v != 0 {
                        continue;
                    }
                    let a = random_vnm(r, k, v, m, (r * 7 + k * 3 + m) as u64).unwrap();
                    let want = reference(&dev, &a, &bs[0]);
                    for bk in [32, 64] {
                        let da = dev.upload_vnm(&a, bk).unwrap();
                        let mine: Vec<&VnmConfig> =
                            configs.iter().filter(|c| c.bm == v && c.bk == bk).collect();
                        let mut local: Vec<(f64, VnmConfig)> = Vec::new();
                        for cfg in mine {
                            let t = dev
                                .time(WARMUP, REPS, BATCH, |i| {
                                    let s = i % SETS;
                                    dev.launch_vnm(&da, &bs[s], &mut cs[s], cfg)
                                })
                                .unwrap();
                            local.push((t.median_us, *cfg));
                            rows.push(Row {
                                kind: "vnm",
                                rows: r,
                                cols: k,
                                n,
                                v,
                                m,
                                config: cfg.to_string(),
                                t,
                                rel_err: None,
                            });
                        }
                        // Check the fastest of this packing; a wrong fast kernel must not win.
                        local.sort_by(|x, y| x.0.total_cmp(&y.0));
                        for (us, cfg) in local {
                            dev.launch_vnm(&da, &bs[0], &mut cs[0], &cfg).unwrap();
                            let got = dev.download_f16(&cs[0]).unwrap();
                            let err = rel_err(&got, &want);
                            if let Some(row) = rows.iter_mut().rev().find(|x| {
                                x.kind == "vnm"
                                    && x.config == cfg.to_string()
                                    && x.m == m
                                    && x.v == v
                                    && x.n == n
                                    && x.rows == r
                                    && x.cols == k
                            }) {
                                row.rel_err = Some(err);
                            }
                            if err < 2e-3 {
                                if best.as_ref().is_none_or(|b| us < b.0) {
                                    best = Some((us, cfg, v));
                                    best_err = Some(err);
                                }
                                break;
                            }
                            eprintln!(
                                "WRONG RESULT {r}x{k} n={n} M={m} [{cfg}]: rel err {err:.2e}"
                            );
                        }
                    }
                }
                let base = cublas[&(r, k, n)];
                if let Some((us, cfg, v)) = best {
                    let speedup = base / us;
                    let ideal = m as f64 / 2.0;
                    let _ = writeln!(
                        summary,
                        "{r},{k},{n},{m},{base:.3},{us:.3},{speedup:.3},{ideal},{:.3},{v},\"{cfg}\",{:.2e}",
                        speedup / ideal,
                        best_err.unwrap_or(f64::NAN)
                    );
                    table.push((r, k, n, m, base, us, speedup, v, cfg));
                }
            }
            // CSR at the densities of 2:8 and 2:32 (fp32, so against fp16 cuBLAS it is a
            // structure baseline, not the same arithmetic), at the first N only.
            if n == ns[0] && !quick {
                let b32 = dev.upload_f32(&exact_values(k * n, 10)).unwrap();
                let mut c32 = dev.zeros_f32(r * n).unwrap();
                for m in [8usize, 32] {
                    let a = random_csr(r, k, 2.0 / m as f64, 77).unwrap();
                    let da = dev.upload_csr(&a).unwrap();
                    for cfg in csr_configs() {
                        let t = dev
                            .time(1, 3, 3, |_| dev.launch_csr(&da, &b32, &mut c32, n, &cfg))
                            .unwrap();
                        rows.push(Row {
                            kind: "csr_f32",
                            rows: r,
                            cols: k,
                            n,
                            v: 0,
                            m,
                            config: cfg.to_string(),
                            t,
                            rel_err: None,
                        });
                    }
                }
            }
            eprintln!("done {r}x{k} n={n} at {:.1} s", t0.elapsed().as_secs_f64());
            // Written after every point, so that a run cut short still brings results back.
            std::fs::write(
                out.join("bench.csv"),
                csv(&rows, |r, k, n| cublas[&(r, k, n)]),
            )
            .unwrap();
            std::fs::write(out.join("summary.csv"), &summary).unwrap();
        }
    }
    std::fs::write(
        out.join("bench.csv"),
        csv(&rows, |r, k, n| cublas[&(r, k, n)]),
    )
    .unwrap();
    std::fs::write(out.join("summary.csv"), &summary).unwrap();

    // Mean speedup over the shapes per (N, M): the Spatha anchors' statistic.
    println!(
        "\nV:N:M (mma.sp) vs cuBLAS fp16 on {}:",
        dev.info().fingerprint()
    );
    println!(
        "{:>11} {:>6} {:>4} {:>9} {:>9} {:>7} {:>6}  best config",
        "shape", "N", "M", "cublas_us", "vnm_us", "speedup", "ideal"
    );
    for (r, k, n, m, base, us, sp, v, cfg) in &table {
        println!(
            "{:>11} {n:>6} {m:>4} {base:>9.1} {us:>9.1} {sp:>7.2} {:>6.1}  V={v} {cfg}",
            format!("{r}x{k}"),
            *m as f64 / 2.0
        );
    }
    for &n in &ns {
        for &m in &ms {
            let sp: Vec<f64> = table
                .iter()
                .filter(|t| t.2 == n && t.3 == m)
                .map(|t| t.6)
                .collect();
            if !sp.is_empty() {
                let mean = sp.iter().sum::<f64>() / sp.len() as f64;
                println!(
                    "mean N={n:>5} 2:{m:<3} speedup {mean:.2}x  ideal {:.1}x  fraction {:.2}",
                    m as f64 / 2.0,
                    mean / (m as f64 / 2.0)
                );
            }
        }
    }
    assert!(
        !table.is_empty(),
        "no V:N:M configuration gave a correct result"
    );
}
