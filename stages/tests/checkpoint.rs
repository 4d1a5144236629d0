//! A user's checkpoint for a layer study: the test writes its own safetensors file (nothing is
//! downloaded). Matching tensors are read as matrices whatever their float dtype; every bad
//! input is an error naming the file and the tensor or glob; and the retained L1 of a 768×768
//! i.i.d. Gaussian layer under unstructured 75 %, 2:8, V:2:8 and vector-wise V×1 equals an
//! independent computation (VENOM, Fig. 11).

use std::collections::HashMap;
use std::path::Path;

use kernels::Pattern;
use safetensors::tensor::{Dtype, TensorView};
use stages::model::read_checkpoint;
use stages::prune::{gaussian, gaussian_inputs, study_layer};
use stages::Method;

const Q: &str = "encoder.layer.0.attention.self.query.weight";
const K: &str = "encoder.layer.0.attention.self.key.weight";

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A checkpoint with a 768×768 Gaussian query (F32), a 64×48 key (F16), a 4-D convolution, a
/// 2-D integer tensor and a bias.
fn write_checkpoint(path: &Path) -> Vec<f32> {
    let q = gaussian(768 * 768, 11);
    let k: Vec<f32> = gaussian(64 * 48, 12);
    let k16: Vec<u8> = k
        .iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect();
    let conv = f32_bytes(&gaussian(4 * 2 * 3 * 3, 13));
    let ids: Vec<u8> = (0..6i64).flat_map(|x| x.to_le_bytes()).collect();
    let bias = f32_bytes(&[0.5; 8]);
    let qb = f32_bytes(&q);
    let tensors = [
        (Q, Dtype::F32, vec![768, 768], &qb),
        (K, Dtype::F16, vec![64, 48], &k16),
        ("conv.weight", Dtype::F32, vec![4, 2, 3, 3], &conv),
        ("ids", Dtype::I64, vec![2, 3], &ids),
        (
            "encoder.layer.0.attention.self.query.bias",
            Dtype::F32,
            vec![8],
            &bias,
        ),
    ];
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let bytes = safetensors::serialize(views, None::<HashMap<String, String>>).unwrap();
    std::fs::write(path, bytes).unwrap();
    q
}

fn err(path: &Path, globs: &[&str], conv: bool) -> String {
    let globs: Vec<String> = globs.iter().map(|g| g.to_string()).collect();
    read_checkpoint(path, &globs, conv).unwrap_err().to_string()
}

#[test]
fn matching_tensors_are_read_and_bad_inputs_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let q = write_checkpoint(&path);
    let globs = vec!["encoder.layer.*.attention.self.*.weight".to_string()];
    let t = read_checkpoint(&path, &globs, false).unwrap();
    let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, [K, Q]);
    assert_eq!((t[1].rows, t[1].cols), (768, 768));
    assert_eq!(t[1].values, q);
    let k = gaussian(64 * 48, 12);
    assert!(t[0]
        .values
        .iter()
        .zip(&k)
        .all(|(a, b)| (a - b).abs() <= 1e-3 * b.abs() + 1e-4));
    let conv = read_checkpoint(&path, &["conv.*".to_string()], true).unwrap();
    assert_eq!((conv[0].rows, conv[0].cols), (4, 18));

    let file = "model.safetensors";
    for (e, needles) in [
        (
            err(&path, &["*.value.weight"], false),
            vec![file, "`*.value.weight` matches no tensor"],
        ),
        (
            err(&path, &["*.bias"], false),
            vec![file, "query.bias", "2-D"],
        ),
        (
            err(&path, &["conv.weight"], false),
            vec![file, "conv.weight", "conv = true"],
        ),
        (err(&path, &["ids"], false), vec![file, "ids", "I64"]),
        (
            err(&dir.path().join("missing.safetensors"), &["*"], false),
            vec!["missing.safetensors"],
        ),
    ] {
        for n in needles {
            assert!(e.contains(n), "`{e}` should mention `{n}`");
        }
    }
    // Not safetensors, and a file cut short.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let e = err(&path, &["*"], false);
    assert!(
        e.contains(file) && e.contains("not a readable safetensors file"),
        "{e}"
    );
    std::fs::write(&path, b"{\"not\": \"this\"}").unwrap();
    let e = err(&path, &["*"], false);
    assert!(e.contains("not a readable safetensors file"), "{e}");
}

/// The retained L1 the pattern's rule keeps, computed directly from |w|.
fn oracle(w: &[f32], rows: usize, cols: usize, p: &Pattern) -> f64 {
    let a: Vec<f64> = w.iter().map(|x| x.abs() as f64).collect();
    let total: f64 = a.iter().sum();
    let kept = match *p {
        Pattern::Unstructured { sparsity } => {
            let mut s = a.clone();
            s.sort_by(|x, y| y.total_cmp(x));
            let keep = ((1.0 - sparsity) * s.len() as f64).round() as usize;
            s[..keep].iter().sum()
        }
        Pattern::Nm { n, m } => a
            .chunks(m)
            .map(|g| {
                let mut g = g.to_vec();
                g.sort_by(|x, y| y.total_cmp(x));
                g[..n].iter().sum::<f64>()
            })
            .sum(),
        Pattern::Vnm { v, m } => {
            let mut kept = 0.0;
            for r0 in (0..rows).step_by(v) {
                for c0 in (0..cols).step_by(m) {
                    let mut best = 0f64;
                    // Every 4 of the block's M columns; each row keeps its best 2 of them.
                    for set in 0u32..(1 << m) {
                        if set.count_ones() != 4 {
                            continue;
                        }
                        let chosen: Vec<usize> = (0..m).filter(|&c| set >> c & 1 == 1).collect();
                        let value: f64 = (r0..r0 + v)
                            .map(|r| {
                                let mut x: Vec<f64> =
                                    chosen.iter().map(|&c| a[r * cols + c0 + c]).collect();
                                x.sort_by(|p, q| q.total_cmp(p));
                                x[0] + x[1]
                            })
                            .sum();
                        best = best.max(value);
                    }
                    kept += best;
                }
            }
            kept
        }
        Pattern::Vector { v, sparsity } => {
            let mut vectors: Vec<(f64, f64)> = vec![];
            for r0 in (0..rows).step_by(v) {
                for c in 0..cols {
                    let x: Vec<f64> = (r0..r0 + v).map(|r| a[r * cols + c]).collect();
                    let l2 = x.iter().map(|y| y * y).sum::<f64>().sqrt();
                    vectors.push((l2, x.iter().sum()));
                }
            }
            vectors.sort_by(|x, y| y.0.total_cmp(&x.0));
            let keep = ((1.0 - sparsity) * vectors.len() as f64).round() as usize;
            vectors[..keep].iter().map(|x| x.1).sum()
        }
        Pattern::Dense => total,
    };
    kept / total
}

#[test]
fn retained_l1_of_a_gaussian_layer_matches_an_independent_computation() {
    let (rows, cols) = (768, 768);
    let w = gaussian(rows * cols, 11);
    let x = gaussian_inputs(64, cols, 5);
    let mut patterns = vec![
        Pattern::Unstructured { sparsity: 0.75 },
        Pattern::Nm { n: 2, m: 8 },
    ];
    patterns.extend([16, 32, 64, 128].map(|v| Pattern::Vnm { v, m: 8 }));
    patterns.extend([2, 4, 8, 16, 32].map(|v| Pattern::Vector { v, sparsity: 0.75 }));
    for p in &patterns {
        let s = study_layer(Q, &w, rows, cols, p, &Method::Magnitude, &x).unwrap();
        let want = oracle(&w, rows, cols, p);
        assert!(
            (s.retained_l1 - want).abs() <= 0.005,
            "{p:?}: retained L1 {} vs {want}",
            s.retained_l1
        );
        assert!(
            (s.sparsity - 0.75).abs() < 1e-9,
            "{p:?}: sparsity {}",
            s.sparsity
        );
        assert!(s.output_error_before > 0.0 && s.output_error_before < 1.0);
        assert_eq!(
            s.output_error_before, s.output_error_after,
            "magnitude updates nothing"
        );
    }
}
