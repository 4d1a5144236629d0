//! Writes a safetensors checkpoint of one BERT-base encoder layer's linear weights, i.i.d.
//! Gaussian (names as Hugging Face writes them: `encoder.layer.0.attention.self.query.weight`
//! 768×768, …, `intermediate.dense.weight` 3072×768, `output.dense.weight` 768×3072), for
//! `experiments/checkpoint-gaussian-bert.toml`: a layer study of a checkpoint without a
//! download. A real model's file is studied the same way.
//!
//! `cargo run --release -p stages --example gaussian_checkpoint -- experiments/gaussian-bert-layer.safetensors`

use stages::model::{write_matrices, CheckpointTensor};
use stages::prune::gaussian;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "experiments/gaussian-bert-layer.safetensors".into());
    let layer = "encoder.layer.0";
    let shapes = [
        ("attention.self.query", 768, 768),
        ("attention.self.key", 768, 768),
        ("attention.self.value", 768, 768),
        ("attention.output.dense", 768, 768),
        ("intermediate.dense", 3072, 768),
        ("output.dense", 768, 3072),
    ];
    let tensors: Vec<CheckpointTensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(name, rows, cols))| CheckpointTensor {
            name: format!("{layer}.{name}.weight"),
            shape: vec![rows, cols],
            rows,
            cols,
            values: gaussian(rows * cols, 100 + i as u64),
        })
        .collect();
    write_matrices(std::path::Path::new(&path), &tensors)?;
    println!("wrote {} tensors to {path}", tensors.len());
    Ok(())
}
