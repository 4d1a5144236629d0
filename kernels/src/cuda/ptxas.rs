//! The resource report of `ptxas -v` (registers, spills) for the cost model, when a ptxas is at
//! hand (PyPI `nvidia-cuda-nvcc-cu12` ships one); callers fall back to
//! [`super::VnmConfig::estimated_registers`] otherwise.

use std::fs;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Resources of one compiled kernel as `ptxas -v` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtxasReport {
    /// Registers per thread.
    pub registers: usize,
    /// Bytes spilled to local memory (stores).
    pub spill_bytes: usize,
    /// Whether ptxas serialised the `wgmma`s (its "Potential Performance Loss: wgmma.mma_async
    /// instructions are serialized" advice): each then waits for the last, and the tensor
    /// cores idle between them.
    pub wgmma_serialized: bool,
}

/// Runs `ptxas -v` on `ptx` for `arch` and reads registers and spills; `None` when no ptxas is
/// found (`$COTUNE_PTXAS`, then `ptxas` on PATH) or its output cannot be read.
pub fn ptxas_report(ptx: &str, arch: &str) -> Option<PtxasReport> {
    let ptxas = std::env::var("COTUNE_PTXAS").unwrap_or_else(|_| "ptxas".into());
    // A folder per call: callers run several at once.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("cotune-ptxas-{}-{call}", std::process::id()));
    fs::create_dir_all(&dir).ok()?;
    let input = dir.join("k.ptx");
    fs::write(&input, ptx).ok()?;
    let out = Command::new(ptxas)
        .arg("-v")
        .arg(format!("-arch={arch}"))
        .arg(&input)
        .arg("-o")
        .arg(dir.join("k.cubin"))
        .output()
        .ok()?;
    let _ = fs::remove_dir_all(&dir);
    if !out.status.success() {
        return None;
    }
    parse_ptxas(&String::from_utf8_lossy(&out.stderr))
}

/// Reads "Used N registers", "N bytes spill stores" and any advice that the `wgmma`s were
/// serialised from ptxas's log.
pub fn parse_ptxas(log: &str) -> Option<PtxasReport> {
    let number_before = |line: &str, word: &str| -> Option<usize> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let i = words.iter().position(|w| w.trim_end_matches(',') == word)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    let mut registers = None;
    let mut spill_bytes = 0;
    let mut wgmma_serialized = false;
    for line in log.lines() {
        wgmma_serialized |= line.contains("wgmma") && line.contains("serialized");
        if line.contains("Used") && line.contains("registers") {
            registers = number_before(line, "registers");
        }
        if line.contains("spill stores") {
            let part = line.split(',').find(|p| p.contains("spill stores"))?;
            spill_bytes = number_before(part, "bytes").unwrap_or(0);
        }
    }
    Some(PtxasReport {
        registers: registers?,
        spill_bytes,
        wgmma_serialized,
    })
}
