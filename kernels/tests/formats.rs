//! Format tests: exact round trips dense+mask ⇄ format on awkward shapes, exact zeros, checked
//! constructors rejecting broken invariants.

use kernels::*;

fn values(len: usize, seed: u64) -> Vec<f32> {
    random_values(len, seed)
}

fn patterns() -> Vec<Pattern> {
    vec![
        Pattern::Dense,
        Pattern::Unstructured { sparsity: 0.75 },
        Pattern::Nm { n: 2, m: 4 },
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Nm { n: 3, m: 5 },
        Pattern::Vnm { v: 1, m: 4 },
        Pattern::Vnm { v: 1, m: 8 },
        Pattern::Vnm { v: 16, m: 10 },
        Pattern::Vector {
            v: 1,
            sparsity: 0.5,
        },
    ]
}

/// Shapes: empty, single, odd, K not a multiple of M, K smaller than M.
const SHAPES: [(usize, usize); 8] = [
    (0, 0),
    (1, 1),
    (16, 0),
    (7, 9),
    (16, 63),
    (32, 17),
    (16, 3),
    (48, 255),
];

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn round_trips_are_exact() {
    for p in patterns() {
        for (i, &(rows, cols)) in SHAPES.iter().enumerate() {
            if p.validate_for(rows, cols).is_err() {
                continue;
            }
            let mut w = values(rows * cols, i as u64);
            // Negative zeros, NaN and infinities must survive as kept values.
            for (j, x) in w.iter_mut().enumerate().take(12) {
                *x = [-0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY][j % 4];
            }
            let scores: Vec<f32> = w.iter().map(|x| x.abs()).collect();
            let mask = build_mask(&p, &scores, rows, cols).unwrap();
            let a = SparseMatrix::from_masked(&p, &w, &mask).unwrap();
            assert_eq!(
                bits(&a.to_dense()),
                bits(&mask.apply(&w).unwrap()),
                "{p} {rows}x{cols}"
            );
            assert_eq!((a.rows(), a.cols()), (rows, cols));
            assert!(a.nnz() >= mask.count(), "{p}: nnz counts every kept weight");
            assert_eq!(a.signature().kind, p.kind());
        }
    }
}

#[test]
fn masked_out_entries_are_exact_positive_zeros() {
    let (rows, cols) = (16, 40);
    let w = vec![f32::NAN; rows * cols];
    let scores = values(rows * cols, 3);
    for p in patterns() {
        let mask = build_mask(&p, &scores, rows, cols).unwrap();
        let d = SparseMatrix::from_masked(&p, &w, &mask).unwrap().to_dense();
        for (i, x) in d.iter().enumerate() {
            if !mask.as_slice()[i] {
                assert_eq!(x.to_bits(), 0, "{p}: position {i}");
            } else {
                assert!(x.is_nan());
            }
        }
    }
}

#[test]
fn vnm_layout_matches_spatha_sizes() {
    let (rows, cols, v, m) = (32, 100, 8, 8);
    let w = values(rows * cols, 4);
    let s: Vec<f32> = w.iter().map(|x| x.abs()).collect();
    let p = Pattern::Vnm { v, m };
    let mask = build_mask(&p, &s, rows, cols).unwrap();
    let SparseMatrix::Vnm(a) = SparseMatrix::from_masked(&p, &w, &mask).unwrap() else {
        panic!("not V:N:M");
    };
    let groups = 13; // ⌈100/8⌉
    assert_eq!(a.k_sp(), 32); // round_up(26, 16)
    assert_eq!(a.values().len(), rows * 32);
    assert_eq!(a.metadata().len(), rows * 32 / 16);
    assert_eq!(a.column_loc().len(), rows / v * groups * 4);
    // Every value sits at the column its metadata and column_loc say.
    let d = mask.apply(&w).unwrap();
    for r in 0..rows {
        for slot in 0..2 * groups {
            if let Some(c) = a.slot_column(r, slot) {
                assert_eq!(
                    a.values()[r * 32 + slot].to_bits(),
                    d[r * cols + c].to_bits()
                );
            }
        }
    }
    let (word, shift) = meta_word_shift(9, 3, 32);
    assert_eq!((word, shift), (1, 22)); // tile 0, step 0, row 9 → word 1, upper half
    assert_eq!(
        a.bytes(),
        4 * a.values().len() + 4 * a.metadata().len() + a.column_loc().len()
    );
}

#[test]
fn masks_that_break_the_structure_are_errors() {
    let w = values(4 * 8, 5);
    // Three kept in a 2:4 group.
    let mut keep = vec![false; 32];
    keep[0] = true;
    keep[1] = true;
    keep[2] = true;
    let mask = Mask::new(4, 8, keep).unwrap();
    let err = SparseMatrix::from_masked(&Pattern::Nm { n: 2, m: 4 }, &w, &mask).unwrap_err();
    assert!(err.to_string().contains("row 0 group 0"), "{err}");
    // V:N:M: five distinct columns in one 2x8 block.
    let mut keep = vec![false; 32];
    for (r, c) in [(0, 0), (0, 1), (1, 2), (1, 3), (0, 8)] {
        keep[r * 8 + c] = true;
    }
    keep[8 + 4] = true;
    let mask = Mask::new(4, 8, keep).unwrap();
    assert!(SparseMatrix::from_masked(&Pattern::Vnm { v: 2, m: 8 }, &w, &mask).is_err());
    // Vector: half a column-vector.
    let mut keep = vec![false; 32];
    keep[0] = true;
    let mask = Mask::new(4, 8, keep).unwrap();
    assert!(SparseMatrix::from_masked(
        &Pattern::Vector {
            v: 2,
            sparsity: 0.5
        },
        &w,
        &mask
    )
    .is_err());
    // Shape errors name the shape and V.
    let err = SparseMatrix::from_masked(
        &Pattern::Vector {
            v: 3,
            sparsity: 0.5,
        },
        &w,
        &mask,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("4x8") && err.to_string().contains("V = 3"),
        "{err}"
    );
}

#[test]
fn checked_constructors_reject_broken_invariants() {
    // CSR: decreasing row_ptr, unsorted columns, column out of range, wrong lengths.
    assert!(CsrMatrix::new(2, 3, vec![0, 2, 1], vec![0, 1], vec![1.0, 2.0]).is_err());
    assert!(CsrMatrix::new(1, 3, vec![0, 2], vec![1, 0], vec![1.0, 2.0]).is_err());
    assert!(CsrMatrix::new(1, 3, vec![0, 1], vec![3], vec![1.0]).is_err());
    assert!(CsrMatrix::new(1, 3, vec![0, 1], vec![0], vec![]).is_err());
    assert!(CsrMatrix::new(1, 3, vec![0, 1], vec![2], vec![1.0]).is_ok());
    // N:M: repeated position, phantom slot with a value.
    assert!(NmMatrix::new(1, 4, 2, 4, vec![1.0, 2.0], vec![1, 1]).is_err());
    assert!(NmMatrix::new(1, 5, 2, 4, vec![1.0, 2.0, 0.0, 3.0], vec![0, 1, 0, 2]).is_err());
    assert!(NmMatrix::new(1, 5, 2, 4, vec![1.0, 2.0, 3.0, 0.0], vec![0, 1, 0, 2]).is_ok());
    // Vector: V not dividing rows, unsorted columns.
    assert!(VectorMatrix::new(3, 4, 2, vec![0, 0], vec![], vec![]).is_err());
    assert!(VectorMatrix::new(2, 4, 2, vec![0, 2], vec![3, 1], vec![0.0; 4]).is_err());
    // V:N:M: wrong buffer lengths, non-increasing column_loc, equal positions.
    let k_sp = vnm_k_sp(8, 8);
    let words = vnm_meta_words(1, k_sp);
    assert!(VnmMatrix::new(
        1,
        8,
        1,
        8,
        vec![0.0; k_sp],
        vec![0; words],
        vec![0, 1, 2, 3]
    )
    .is_err());
    let mut meta = vec![0u32; words];
    for g in 0..k_sp / 2 {
        let (w, s) = meta_word_shift(0, 2 * g + 1, k_sp);
        meta[w] |= 1 << s;
    }
    for r in 1..16 {
        for g in 0..k_sp / 2 {
            let (w, s) = meta_word_shift(r, 2 * g + 1, k_sp);
            meta[w] |= 1 << s;
        }
    }
    assert!(VnmMatrix::new(1, 8, 1, 8, vec![0.0; k_sp], meta.clone(), vec![0, 1, 2, 3]).is_ok());
    assert!(VnmMatrix::new(1, 8, 1, 8, vec![0.0; k_sp], meta.clone(), vec![0, 2, 2, 3]).is_err());
    assert!(VnmMatrix::new(
        1,
        8,
        1,
        8,
        vec![0.0; k_sp - 1],
        meta.clone(),
        vec![0, 1, 2, 3]
    )
    .is_err());
    // Padding slot with a value.
    let mut vals = vec![0.0; k_sp];
    vals[k_sp - 1] = 1.0;
    assert!(VnmMatrix::new(1, 8, 1, 8, vals, meta, vec![0, 1, 2, 3]).is_err());
}

#[test]
fn signatures_match_between_pattern_and_matrix() {
    let (rows, cols) = (32, 64);
    let w = values(rows * cols, 6);
    let s: Vec<f32> = w.iter().map(|x| x.abs()).collect();
    for p in patterns() {
        let mask = build_mask(&p, &s, rows, cols).unwrap();
        let a = SparseMatrix::from_masked(&p, &w, &mask).unwrap();
        assert_eq!(
            a.signature(),
            FormatSignature::for_pattern(&p, rows, cols).unwrap(),
            "{p}"
        );
        assert_eq!(a.signature().pattern().kind(), p.kind());
    }
}
