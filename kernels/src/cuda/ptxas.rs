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
/// serialised from ptxas's log. A program of several entry functions (the Hopper kernel and its
/// split-K reduction) reports the most registers any of them uses and the spills of all: ptxas
/// lists the functions in an order of its own, and the last function's figures alone would be
/// the reduction's 32 registers wherever it came last.
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
            let used = number_before(line, "registers");
            registers = registers.max(used);
        }
        if line.contains("spill stores") {
            let part = line.split(',').find(|p| p.contains("spill stores"))?;
            spill_bytes += number_before(part, "bytes").unwrap_or(0);
        }
    }
    Some(PtxasReport {
        registers: registers?,
        spill_bytes,
        wgmma_serialized,
    })
}

/// One line on a set of programs' reports: how many there are, their registers, and the
/// programs that spill or whose `wgmma`s were serialised (the first three named). `reports`
/// pairs a program's name with its report, `None` where none was made.
pub fn ptxas_summary(reports: &[(String, Option<PtxasReport>)]) -> String {
    let known: Vec<(&str, PtxasReport)> = reports
        .iter()
        .filter_map(|(name, r)| r.map(|r| (name.as_str(), r)))
        .collect();
    let named = |what: &str, bad: Vec<String>| match bad.len() {
        0 => format!("{what} in none"),
        n => format!(
            "{what} in {n} ({}{})",
            bad[..n.min(3)].join("; "),
            if n > 3 { "; ..." } else { "" }
        ),
    };
    let spills = known
        .iter()
        .filter(|(_, r)| r.spill_bytes > 0)
        .map(|(name, r)| format!("{name}: {} bytes", r.spill_bytes))
        .collect();
    let serialized = known
        .iter()
        .filter(|(_, r)| r.wgmma_serialized)
        .map(|(name, _)| name.to_string())
        .collect();
    let registers: Vec<usize> = known.iter().map(|(_, r)| r.registers).collect();
    format!(
        "ptxas: {} of {} programs reported, registers {}, {}, {}",
        known.len(),
        reports.len(),
        match (registers.iter().min(), registers.iter().max()) {
            (Some(lo), Some(hi)) => format!("{lo}..{hi}"),
            _ => "unknown".to_string(),
        },
        named("spills", spills),
        named("serialised wgmmas", serialized)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the report was the last function's, so a program whose reduction ptxas
    /// listed last read 32 registers and no spills.
    #[test]
    fn a_program_of_two_functions_reports_the_larger_and_every_spill() {
        let function = |name: &str, registers: usize, spills: usize| {
            format!(
                "ptxas info    : Compiling entry function '{name}' for 'sm_90a'\n\
                 ptxas info    : Function properties for {name}\n\
                 ptxas         .     0 bytes stack frame, {spills} bytes spill stores, {spills} bytes spill loads\n\
                 ptxas info    : Used {registers} registers, used 0 barriers\n"
            )
        };
        let product = function("spmm_vnm_wgmma_f16", 168, 8);
        let reduce = function("spmm_vnm_wgmma_reduce_f16", 32, 0);
        for log in [product.clone() + &reduce, reduce + &product] {
            let r = parse_ptxas(&log).unwrap();
            assert_eq!((r.registers, r.spill_bytes), (168, 8), "{log}");
        }
        assert_eq!(parse_ptxas("no report here"), None);
    }

    #[test]
    fn the_summary_counts_registers_and_names_spills_and_serialised_wgmmas() {
        let report = |registers, spill_bytes, wgmma_serialized| {
            Some(PtxasReport {
                registers,
                spill_bytes,
                wgmma_serialized,
            })
        };
        let mut reports = vec![
            ("a".to_string(), report(90, 0, false)),
            ("b".to_string(), report(200, 16, false)),
            ("c".to_string(), None),
            ("d".to_string(), report(168, 0, true)),
        ];
        assert_eq!(
            ptxas_summary(&reports),
            "ptxas: 3 of 4 programs reported, registers 90..200, spills in 1 (b: 16 bytes), \
             serialised wgmmas in 1 (d)"
        );
        reports.extend((0..3).map(|i| (format!("e{i}"), report(64, 8, false))));
        assert!(ptxas_summary(&reports).contains(
            "registers 64..200, spills in 4 (b: 16 bytes; e0: 8 bytes; e1: 8 bytes; ...)"
        ));
        assert_eq!(
            ptxas_summary(&[("c".to_string(), None)]),
            "ptxas: 0 of 1 programs reported, registers unknown, spills in none, serialised \
             wgmmas in none"
        );
    }
}
