//! Kernel tests: every CPU kernel × every valid parameter point (a sample on the largest shape)
//! against the scalar reference on awkward shapes; NaN/Inf propagation; bad points and shapes.

use kernels::*;

struct Case {
    pattern: Pattern,
    rows: usize,
    cols: usize,
    n: usize,
}

/// Patterns that fit `rows` (V-patterns take the largest V in {16, 8, 4, 2, 1} dividing it).
fn patterns_for(rows: usize) -> Vec<Pattern> {
    let v = [16, 8, 4, 2, 1]
        .into_iter()
        .find(|&v| rows.is_multiple_of(v))
        .unwrap_or(1);
    let mut wide = vec![];
    if rows.is_multiple_of(64) {
        // V = 64 as the quickstart prunes: whole 8-vector row chunks for the batch-1 kernels.
        wide = vec![
            Pattern::Vnm { v: 64, m: 8 },
            Pattern::Vector {
                v: 64,
                sparsity: 0.75,
            },
        ];
    }
    wide.extend([
        Pattern::Unstructured { sparsity: 0.5 },
        Pattern::Unstructured { sparsity: 0.875 },
        Pattern::Nm { n: 2, m: 4 },
        Pattern::Nm { n: 1, m: 3 },
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Vnm { v, m: 4 },
        Pattern::Vnm { v, m: 8 },
        // M = 16: windows of 16 of x at batch 1 (N:M's, and V:N:M's group panels up to V = 64).
        Pattern::Nm { n: 2, m: 16 },
        Pattern::Vnm { v, m: 16 },
        Pattern::Vnm { v: 1, m: 6 },
        Pattern::Vector { v, sparsity: 0.5 },
        Pattern::Vector {
            v: 1,
            sparsity: 0.75,
        },
        Pattern::Dense,
    ]);
    wide
}

/// Shapes (rows, cols, n): empty, single, odd, K not a multiple of M, N not a multiple of 8/16;
/// and batch 1 (the matrix-vector kernels) with K giving whole steps of 8 and 16 groups, a
/// partial step and a scalar tail, and rows that end in a partial panel of 8 or 16 rows (the
/// across-rows kernels); and a few columns (2 to 32: the across-rows kernels over several
/// columns, 4 at a time and a remainder of 1, 2 or 3) on partial panels and groups, and a few
/// past whole vectors (17, 33, 36: the tile kernels and those kernels side by side); and K a
/// multiple of M with an even V (V:N:M's row pairs reading B's packed tile without a gather),
/// a full tile and a partial one.
const SHAPES: [(usize, usize, usize); 20] = [
    (0, 5, 3),
    (1, 1, 1),
    (7, 9, 5),
    (16, 0, 4),
    (16, 63, 17),
    (8, 30, 0),
    (64, 255, 33),
    (64, 255, 1),
    (32, 1024, 1),
    (48, 130, 1),
    (3, 37, 1),
    (24, 200, 1),
    (13, 70, 1),
    (48, 130, 2),
    (13, 70, 7),
    (64, 200, 32),
    (24, 37, 10),
    (24, 70, 36),
    (32, 96, 90),
    // N = 5 vectors on AVX-512 (10 on AVX2): tiles of 2, 3 and 4 vectors leave a last tile of
    // whole vectors, read in place by a kernel of its own width; a tile of 6 does not divide.
    (16, 48, 80),
];

fn build(case: &Case, seed: u64, tweak: impl Fn(&mut [f32])) -> (SparseMatrix, SparseMatrix) {
    let mut w = random_values(case.rows * case.cols, seed);
    tweak(&mut w);
    let scores: Vec<f32> = random_values(w.len(), seed + 1)
        .iter()
        .map(|x| x.abs())
        .collect();
    let mask = build_mask(&case.pattern, &scores, case.rows, case.cols).unwrap();
    let a = SparseMatrix::from_masked(&case.pattern, &w, &mask).unwrap();
    let abs: Vec<f32> = w.iter().map(|x| x.abs()).collect();
    let a_abs = SparseMatrix::from_masked(&case.pattern, &abs, &mask).unwrap();
    (a, a_abs)
}

/// Element-wise: same NaN-ness, equal infinities, finite values within a tolerance scaled by
/// the reference computed on |A|·|B|.
fn assert_close(got: &[f32], want: &[f32], scale: &[f32], cols: usize, what: &str) {
    assert_eq!(got.len(), want.len());
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= 2e-6 * (cols as f32 + 1.0) * scale[i] + 1e-6
        };
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// A random B (seed `seed`), the reference product A·B and its error scale |A|·|B|.
fn reference(
    case: &Case,
    a: &SparseMatrix,
    a_abs: &SparseMatrix,
    seed: u64,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let b = random_values(case.cols * case.n, seed);
    let b_abs: Vec<f32> = b.iter().map(|x| x.abs()).collect();
    let mut want = vec![0.0; case.rows * case.n];
    let mut scale = vec![0.0; case.rows * case.n];
    spmm_reference(a, &b, case.n, &mut want).unwrap();
    spmm_reference(a_abs, &b_abs, case.n, &mut scale).unwrap();
    (b, want, scale)
}

fn check_all_points(case: &Case, sample_every: usize) {
    let (a, a_abs) = build(case, 11, |_| {});
    let (b, want, scale) = reference(case, &a, &a_abs, 12);
    let space = cpu_space(&a.signature(), case.n);
    let points = space.points();
    assert!(!points.is_empty(), "{}: empty space", case.pattern);
    for (i, p) in points.iter().enumerate() {
        if !i.is_multiple_of(sample_every) && i != points.len() - 1 {
            continue;
        }
        let mut got = vec![f32::NAN; case.rows * case.n];
        spmm(&a, &b, case.n, &mut got, p).unwrap();
        let what = format!(
            "{} {}x{}x{} {:?}",
            case.pattern, case.rows, case.cols, case.n, p.0
        );
        assert_close(&got, &want, &scale, case.cols, &what);
    }
}

#[test]
fn every_kernel_and_point_matches_the_reference() {
    for &(rows, cols, n) in &SHAPES {
        for pattern in patterns_for(rows) {
            let case = Case {
                pattern,
                rows,
                cols,
                n,
            };
            if case.pattern.validate_for(rows, cols).is_err() {
                continue;
            }
            let sample = if rows * cols * n > 100_000 { 5 } else { 1 };
            check_all_points(&case, sample);
        }
    }
}

/// V:N:M, and N:M in row pairs (`rows = 2`, V:N:M with V = 2), run in bands of whole V-blocks
/// that fit a quarter of L2 where B is smaller than its tiles' quarters (`cpu::vnm_band`): at
/// 2048 × 512 × 200 the matrix (asserted above a quarter of this machine's L2) and B (400 KB,
/// asserted below two quarters) band every point with two tiles or more, on one thread and on
/// two (each thread's rows in bands of their own), the last band short of the others; N not a
/// multiple of a tile; with a bias and ReLU, each band's own. N:M's pair points all, V:N:M's
/// every third.
#[test]
fn row_blocks_in_bands_match_the_reference() {
    let patterns = [
        (Pattern::Nm { n: 2, m: 4 }, 1),
        (Pattern::Nm { n: 2, m: 8 }, 1),
        (Pattern::Vnm { v: 16, m: 4 }, 3),
        (Pattern::Vnm { v: 32, m: 8 }, 3),
    ];
    for (pattern, every) in patterns {
        let pairs_only = matches!(pattern, Pattern::Nm { .. });
        let case = Case {
            pattern,
            rows: 2048,
            cols: 512,
            n: 200,
        };
        let (a, a_abs) = build(&case, 21, |_| {});
        let quarter = l2_cache_bytes() / 4;
        assert!(a.bytes() > quarter && 4 * case.cols * case.n < 2 * quarter);
        let (b, want, scale) = reference(&case, &a, &a_abs, 22);
        let points: Vec<ParamPoint> = cpu_space(&a.signature(), case.n)
            .points()
            .into_iter()
            .filter(|p| !pairs_only || p.0.get("rows") == Some(&2))
            .step_by(every)
            .collect();
        assert!(!points.is_empty(), "{}: no points", case.pattern);
        // Each band's bias is its own rows': the epilogue against the product, bit for bit.
        let bias = random_values(case.rows, 23);
        for p in &points {
            let what = format!("{} {:?}", case.pattern, p.0);
            let mut got = vec![f32::NAN; case.rows * case.n];
            spmm(&a, &b, case.n, &mut got, p).unwrap();
            assert_close(&got, &want, &scale, case.cols, &what);
            let mut with = vec![f32::NAN; case.rows * case.n];
            let epilogue = Epilogue {
                bias: Some(&bias),
                activation: Activation::Relu,
            };
            spmm_with(&a, &b, case.n, &mut with, p, epilogue).unwrap();
            for (i, (x, y)) in got.iter().zip(&with).enumerate() {
                let s = x + bias[i / case.n];
                let expect = if s < 0.0 { 0.0 } else { s };
                assert_eq!(y.to_bits(), expect.to_bits(), "{what}: C[{i}]");
            }
        }
    }
}

/// Regression: with 16 lanes a 12-vector tile is 192 floats wide, and a partial last tile
/// (540 = 2 · 192 + 156 columns) went through 128-float stack buffers, writing past them.
#[test]
fn partial_tiles_wider_than_128_floats_match_the_reference() {
    for pattern in patterns_for(8) {
        let case = Case {
            pattern,
            rows: 8,
            cols: 16,
            n: 540,
        };
        if case.pattern.validate_for(8, 16).is_ok() {
            check_all_points(&case, 1);
        }
    }
}

#[test]
fn nan_and_inf_propagate_like_the_reference() {
    for (rows, cols, n) in [(16, 130, 19), (16, 130, 1), (24, 70, 1), (16, 128, 80)] {
        nan_and_inf_propagate_at(rows, cols, n);
    }
}

fn nan_and_inf_propagate_at(rows: usize, cols: usize, n: usize) {
    for pattern in patterns_for(rows) {
        let case = Case {
            pattern,
            rows,
            cols,
            n,
        };
        let (a, a_abs) = build(&case, 21, |w| {
            w[3] = f32::NAN;
            w[cols + 5] = f32::INFINITY;
            w[2 * cols + 7] = f32::NEG_INFINITY;
        });
        let mut b = random_values(cols * n, 22);
        b[4 * n + 2] = f32::NAN;
        b[9 * n + 1] = f32::INFINITY;
        b[(cols - 1) * n + n - 1] = f32::NEG_INFINITY;
        let b_abs: Vec<f32> = b.iter().map(|x| x.abs()).collect();
        let (mut want, mut scale) = (vec![0.0; rows * n], vec![0.0; rows * n]);
        spmm_reference(&a, &b, n, &mut want).unwrap();
        spmm_reference(&a_abs, &b_abs, n, &mut scale).unwrap();
        for p in cpu_space(&a.signature(), n).points().iter().step_by(3) {
            let mut got = vec![0.0; rows * n];
            spmm(&a, &b, n, &mut got, p).unwrap();
            assert_close(
                &got,
                &want,
                &scale,
                cols,
                &format!("{} {:?}", case.pattern, p.0),
            );
        }
    }
}

#[test]
fn points_outside_the_space_name_the_parameter() {
    let sig = FormatSignature::for_pattern(&Pattern::Vnm { v: 8, m: 8 }, 16, 32).unwrap();
    let a = synthetic(&sig, 1).unwrap();
    let (b, mut c) = (vec![1.0; 32 * 16], vec![0.0; 16 * 16]);
    let good = cpu_space(&sig, 16).points()[0].clone();
    spmm(&a, &b, 16, &mut c, &good).unwrap();
    let mut missing = good.clone();
    missing.0.remove("tile_n");
    let err = spmm(&a, &b, 16, &mut c, &missing).unwrap_err();
    assert!(
        matches!(&err, KernelError::MissingParam { name } if name == "tile_n"),
        "{err}"
    );
    let mut unknown = good.clone();
    unknown.0.insert("warp".into(), 1);
    let err = spmm(&a, &b, 16, &mut c, &unknown).unwrap_err();
    assert!(err.to_string().contains("`warp`"), "{err}");
    let mut bad = good.clone();
    bad.0.insert("rows".into(), 5); // not an offered value
    let err = spmm(&a, &b, 16, &mut c, &bad).unwrap_err();
    assert!(
        matches!(&err, KernelError::ParamValue { name, .. } if name == "rows"),
        "{err}"
    );
    let mut threads = good;
    threads.0.insert("threads".into(), 0);
    assert!(spmm(&a, &b, 16, &mut c, &threads)
        .unwrap_err()
        .to_string()
        .contains("threads"));
}

/// A layer pruned to nothing (sparsity 1, as a layer's measured sparsity can be after pruning at
/// 0.9999999): CSR and vector-wise hold no values, and every point of their spaces writes exact
/// zeros over a C that held NaN, at batch 1, a few columns and tiles; the model costs them.
#[test]
fn a_matrix_pruned_to_nothing_gives_exact_zeros_at_every_point() {
    for pattern in [
        Pattern::Unstructured { sparsity: 1.0 },
        Pattern::Vector {
            v: 8,
            sparsity: 1.0,
        },
    ] {
        for &(rows, cols, n) in &[(16, 63, 17), (64, 255, 1), (48, 130, 2), (24, 70, 36)] {
            let mask = build_mask(&pattern, &random_values(rows * cols, 5), rows, cols).unwrap();
            let a =
                SparseMatrix::from_masked(&pattern, &random_values(rows * cols, 6), &mask).unwrap();
            assert_eq!(a.nnz(), 0, "{pattern}");
            let sig = a.signature();
            assert_eq!(sig.density_ppm, 0);
            assert_eq!(sig.pattern(), pattern);
            let b = random_values(cols * n, 7);
            for p in cpu_space(&sig, n).points() {
                let mut c = vec![f32::NAN; rows * n];
                spmm(&a, &b, n, &mut c, &p).unwrap();
                assert!(
                    c.iter().all(|&x| x == 0.0),
                    "{pattern} {rows}x{cols}x{n} {:?}",
                    p.0
                );
                let cost = predicted_cost(&sig, n, &p);
                assert!(cost.is_finite() && cost > 0.0, "{pattern} {:?}", p.0);
            }
            assert_eq!(synthetic(&sig, 3).unwrap().nnz(), 0);
        }
    }
    assert!(Pattern::Unstructured { sparsity: 1.5 }.validate().is_err());
}

#[test]
fn shape_mismatches_are_errors() {
    let sig = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 4 }, 4, 8).unwrap();
    let a = synthetic(&sig, 2).unwrap();
    let p = cpu_space(&sig, 4).points()[0].clone();
    let mut c = vec![0.0; 16];
    assert!(spmm(&a, &[0.0; 31], 4, &mut c, &p).is_err());
    assert!(spmm(&a, &[0.0; 32], 4, &mut c[..15], &p).is_err());
    assert!(spmm_reference(&a, &[0.0; 33], 4, &mut c).is_err());
}

#[test]
fn dense_backends_match_the_reference() {
    for &(rows, cols, n) in &[(0, 3, 2), (1, 1, 1), (7, 9, 5), (33, 65, 17), (4, 0, 3)] {
        let w = random_values(rows * cols, 31);
        let b = random_values(cols * n, 32);
        let a = SparseMatrix::Dense(DenseMatrix::new(rows, cols, w.clone()).unwrap());
        let abs = |x: &[f32]| x.iter().map(|v| v.abs()).collect::<Vec<f32>>();
        let a_abs = SparseMatrix::Dense(DenseMatrix::new(rows, cols, abs(&w)).unwrap());
        let (mut want, mut scale) = (vec![0.0; rows * n], vec![0.0; rows * n]);
        spmm_reference(&a, &b, n, &mut want).unwrap();
        spmm_reference(&a_abs, &abs(&b), n, &mut scale).unwrap();
        for p in dense_space(rows, cols, n).points() {
            let mut got = vec![f32::NAN; rows * n];
            dense_gemm(&w, rows, cols, &b, n, &mut got, &p).unwrap();
            assert_close(
                &got,
                &want,
                &scale,
                cols,
                &format!("dense {rows}x{cols}x{n} {:?}", p.0),
            );
            let mut via_spmm = vec![f32::NAN; rows * n];
            spmm(&a, &b, n, &mut via_spmm, &p).unwrap();
            assert_close(&via_spmm, &want, &scale, cols, "dense via spmm");
        }
    }
}

#[test]
fn spaces_enumerate_valid_points_and_costs_are_finite() {
    let sig = FormatSignature::for_pattern(&Pattern::Vnm { v: 64, m: 8 }, 3072, 768).unwrap();
    let space = cpu_space(&sig, 512);
    let points = space.points();
    assert!(points.len() >= 8);
    for p in &points {
        space.contains(p).unwrap();
        let cost = predicted_cost(&sig, 512, p);
        assert!(cost.is_finite() && cost > 0.0, "{:?}", p.0);
    }
    for p in dense_space(3072, 768, 512).points() {
        assert!(dense_predicted_cost(3072, 768, 512, &p) > 0.0);
    }
    assert!(cpu_fingerprint().ends_with(&isa().to_string()));
}

/// The narrower ISAs' kernels (scalar always; AVX2 where AVX-512 is detected) against the
/// reference: the test binary runs its own reference tests again with `COTUNE_ISA` set (the ISA
/// is chosen once per process).
#[test]
fn narrower_isas_match_the_reference() {
    if std::env::var_os("COTUNE_ISA").is_some() {
        return; // the child itself
    }
    let mut narrower = vec!["scalar"];
    if isa() == Isa::Avx512 {
        narrower.push("avx2");
    }
    for name in narrower {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "--test-threads=1"])
            .args([
                "every_kernel_and_point_matches_the_reference",
                "nan_and_inf_propagate_like_the_reference",
            ])
            .env("COTUNE_ISA", name)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("2 passed"),
            "COTUNE_ISA={name}:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The fused epilogue is the bias and the activation (ReLU, GELU) applied after the product,
/// bit for bit, on every format, shape (batch 1 and K = 0 included) and thread count; a bias of
/// the wrong length is an error.
#[test]
fn the_epilogue_equals_bias_and_activation_after_the_product_bit_for_bit() {
    for &(rows, cols, n) in &SHAPES {
        for pattern in patterns_for(rows) {
            if pattern.validate_for(rows, cols).is_err() {
                continue;
            }
            let case = Case {
                pattern,
                rows,
                cols,
                n,
            };
            let (a, _) = build(&case, 21, |_| {});
            let mut b = random_values(cols * n, 22);
            // A NaN in C's column 0 (both activations keep it) and an infinity in column 1 (ReLU
            // and GELU keep +∞ and zero −∞).
            if cols * n > 2 {
                b[0] = f32::NAN;
                b[1] = f32::INFINITY;
            }
            let bias = random_values(rows, 23);
            let points = cpu_space(&a.signature(), n).points();
            let picks = [0, points.len() / 2, points.len().saturating_sub(1)];
            for p in picks.iter().filter_map(|&i| points.get(i)) {
                let mut plain = vec![0.0; rows * n];
                spmm(&a, &b, n, &mut plain, p).unwrap();
                for activation in [Activation::None, Activation::Relu, Activation::Gelu] {
                    let mut want = plain.clone();
                    for (r, row) in want.chunks_mut(n.max(1)).enumerate() {
                        for v in row {
                            *v += bias[r];
                            *v = match activation {
                                Activation::None => *v,
                                Activation::Relu if *v < 0.0 => 0.0,
                                Activation::Relu => *v,
                                Activation::Gelu => gelu_f32(*v),
                            };
                        }
                    }
                    let mut got = vec![f32::NAN; rows * n];
                    let epilogue = Epilogue {
                        bias: Some(&bias),
                        activation,
                    };
                    spmm_with(&a, &b, n, &mut got, p, epilogue).unwrap();
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{} {rows}x{cols}x{n} {:?} {activation:?}",
                        case.pattern,
                        p.0
                    );
                }
            }
            if rows > 0 {
                let mut c = vec![0.0; rows * n];
                let short = Epilogue {
                    bias: Some(&bias[1..]),
                    activation: Activation::None,
                };
                let p = &points[0];
                assert!(spmm_with(&a, &b, n, &mut c, p, short).is_err());
            }
        }
    }
}

/// Two threads give the one-thread result bit for bit, whether they split the rows or (when the
/// N tiles, or the dense baseline's 16-column bands, divide evenly) the tiles, with and without
/// an epilogue: every format and point at shapes where both splits occur.
#[test]
fn every_thread_split_gives_the_one_thread_result_bit_for_bit() {
    let shapes = [
        (16, 63, 64),
        (64, 255, 96),
        (48, 130, 128),
        // The dense baseline's bands with the epilogue by rows (C of 16 Ki floats).
        (128, 40, 128),
        (7, 9, 32),
        (16, 40, 50),
        (48, 130, 1),
        (40, 1024, 1),
        (21, 70, 1),
        (48, 130, 5),
        (21, 70, 17),
    ];
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (rows, cols, n) in shapes {
        for pattern in patterns_for(rows) {
            if pattern.validate_for(rows, cols).is_err() {
                continue;
            }
            let case = Case {
                pattern,
                rows,
                cols,
                n,
            };
            let (a, _) = build(&case, 31, |_| {});
            let b = random_values(cols * n, 32);
            let bias = random_values(rows, 33);
            let space = match a {
                SparseMatrix::Dense(_) => dense_space(rows, cols, n),
                _ => cpu_space(&a.signature(), n),
            };
            for p in space
                .points()
                .iter()
                .filter(|p| p.0.get("threads") == Some(&2))
            {
                let mut one = p.clone();
                one.0.insert("threads".into(), 1);
                for epilogue in [
                    Epilogue::default(),
                    Epilogue {
                        bias: Some(&bias),
                        activation: Activation::Relu,
                    },
                    Epilogue {
                        bias: Some(&bias),
                        activation: Activation::Gelu,
                    },
                ] {
                    let mut want = vec![f32::NAN; rows * n];
                    spmm_with(&a, &b, n, &mut want, &one, epilogue).unwrap();
                    let mut got = vec![f32::NAN; rows * n];
                    spmm_with(&a, &b, n, &mut got, p, epilogue).unwrap();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{} {rows}x{cols}x{n} {:?} {epilogue:?}",
                        case.pattern,
                        p.0
                    );
                }
            }
        }
    }
}
