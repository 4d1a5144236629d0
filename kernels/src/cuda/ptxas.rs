//! The resource report of `ptxas -v` (registers, spills) that NVRTC's log carries for a real
//! architecture (`Compiled::report`): the compile tests' checks and the cost model's register
//! table (`kernels/cuda/ptxas_resources.csv`); without one the model falls back to
//! [`super::VnmConfig::estimated_registers`].

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
