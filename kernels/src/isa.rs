//! The instruction set the CPU kernels use, chosen once per process at run time.

use std::fmt;
use std::sync::OnceLock;

/// A SIMD instruction set the CPU kernels are compiled for (all three always are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// AVX-512F (+ FMA): 16 f32 lanes, 32 registers.
    Avx512,
    /// AVX2 + FMA: 8 f32 lanes, 16 registers.
    Avx2,
    /// Portable scalar code.
    Scalar,
}

impl Isa {
    /// f32 lanes per vector.
    pub fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2 => 8,
            Isa::Scalar => 1,
        }
    }

    /// Vector registers available for accumulators and operands.
    pub fn registers(self) -> usize {
        match self {
            Isa::Avx512 => 32,
            Isa::Avx2 | Isa::Scalar => 16,
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
            Isa::Scalar => "scalar",
        })
    }
}

/// Detects the best ISA of this CPU.
fn detect() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("fma") {
            return Isa::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Scalar
}

/// The ISA the kernels use in this process: the detected one, or a narrower one named by
/// `COTUNE_ISA` (`scalar`, `avx2`; to test and time the fallback paths). Read once. A name that
/// is unknown or wider than the CPU supports is ignored with a warning on stderr.
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let best = detect();
        let Ok(name) = std::env::var("COTUNE_ISA") else {
            return best;
        };
        let wanted = match name.as_str() {
            "scalar" => Some(Isa::Scalar),
            "avx2" => Some(Isa::Avx2),
            "avx512" => Some(Isa::Avx512),
            _ => None,
        };
        match wanted {
            Some(w) if w.lanes() <= best.lanes() => w,
            Some(_) => {
                eprintln!("warning: COTUNE_ISA={name} ignored: this CPU runs {best}");
                best
            }
            None => {
                eprintln!(
                    "warning: COTUNE_ISA={name} ignored: not one of scalar, avx2, avx512 \
                     (this CPU runs {best})"
                );
                best
            }
        }
    })
}

/// The CPU as tunings see it: model name (from `/proc/cpuinfo`, or "unknown cpu") with its
/// family and model numbers where given (a VM's "AMD EPYC" names several generations), the
/// cores available to this process (the `threads` values of the spaces; `taskset` and cgroup
/// limits change them), any kernel switch that changes which code runs (the environment
/// variables read in `cpu/kernels/vnm.rs` and `cpu/few_columns.rs`, named only where set to
/// something other than their default, so that what was measured with one never stands for
/// the default kernels), and the chosen ISA, e.g. `"AMD EPYC (family 25, model 17) / 2 cores /
/// avx512"`. Part of the calibrate and kernel-tune keys.
pub fn cpu_fingerprint() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let mut model = field("model name").unwrap_or_else(|| "unknown cpu".to_string());
    if let (Some(family), Some(number)) = (field("cpu family"), field("model")) {
        model = format!("{model} (family {family}, model {number})");
    }
    let cores = match available_cores() {
        1 => "1 core".to_string(),
        n => format!("{n} cores"),
    };
    let mut parts = vec![model, cores];
    parts.extend(crate::cpu::switches_in_effect());
    parts.push(isa().to_string());
    parts.join(" / ")
}

/// Cores available to this process (asked once: on Linux the answer reads cgroup files, which
/// costs tens of microseconds, more than a small product).
pub fn available_cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
