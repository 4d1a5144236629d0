//! A user's checkpoint for a layer study: the test writes its own safetensors file (nothing is
//! downloaded). Matching tensors are read as matrices whatever their float dtype, and every bad
//! input is an error naming the file and the tensor or glob. (The retained L1 of a study is
//! checked against an independent computation through the engine, in the e2e tests.)

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use stages::model::read_checkpoint;
use stages::prune::gaussian;

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
