//! VENOM Fig. 11 on a synthetic layer: the retained L1 norm of a 768×768 i.i.d. Gaussian
//! matrix at 75 % sparsity under unstructured, 2:8, V:2:8 (V = 16 … 128) and vector-wise V×1
//! (V = 2 … 32), plus unstructured 90 %, by magnitude; with the relative output error
//! ‖(W − Ŵ)X‖/‖WX‖ on 256 Gaussian calibration tokens for magnitude, Wanda and SparseGPT (after
//! its update). The layer study a user runs on a checkpoint's tensors computes the same numbers.
//!
//! `cargo run --release -p stages --example layer_study`

use kernels::Pattern;
use stages::prune::{gaussian, gaussian_inputs, study_layer, ONE_SHOT_DEFAULTS};
use stages::{Calibration, CalibrationInputs, Method, Scope};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, cols) = (768, 768);
    let w = gaussian(rows * cols, 11);
    let x = gaussian_inputs(256, cols, 5);
    let calibration = Calibration {
        samples: 256,
        inputs: CalibrationInputs::Sequential,
    };
    let methods = [
        Method::Magnitude,
        Method::Wanda {
            calibration,
            scope: Scope::Row,
        },
        Method::SparseGpt {
            calibration,
            damp: ONE_SHOT_DEFAULTS.1,
            block: ONE_SHOT_DEFAULTS.2,
            scope: Scope::Layer,
        },
    ];
    let mut patterns = vec![
        Pattern::Unstructured { sparsity: 0.75 },
        Pattern::Nm { n: 2, m: 8 },
    ];
    patterns.extend([16, 32, 64, 128].map(|v| Pattern::Vnm { v, m: 8 }));
    patterns.extend([2, 4, 8, 16, 32].map(|v| Pattern::Vector { v, sparsity: 0.75 }));
    patterns.push(Pattern::Unstructured { sparsity: 0.9 });
    println!(
        "pattern                  retained_l1  out_err_magnitude  out_err_wanda  out_err_sparsegpt"
    );
    for p in &patterns {
        let s: Vec<_> = methods
            .iter()
            .map(|m| study_layer("gaussian", &w, rows, cols, p, m, &x))
            .collect::<Result<_, _>>()?;
        println!(
            "{:<24} {:>11.4} {:>18.4} {:>14.4} {:>18.4}",
            p.to_string(),
            s[0].retained_l1,
            s[0].output_error_before,
            s[1].output_error_after,
            s[2].output_error_after
        );
    }
    Ok(())
}
