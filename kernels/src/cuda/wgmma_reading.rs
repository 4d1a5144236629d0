//! Which reading of the `wgmma.sp` layouts the Hopper kernel is built with. The PTX ISA leaves
//! a few layouts open (`kernels/cuda/NOTES.md`, "wgmma layouts"); the kernel is written for the
//! emulator's reading, and each `#define` here flips one choice. The device check's layout
//! probe (`kernels/tests/cuda_device_wgmma.rs`) finds the reading the device takes and hands it
//! to the later steps of the same run as `COTUNE_WGMMA_READING`, so that a device session
//! yields a benchmark table even when the emulator's reading is wrong in one place.

use std::sync::OnceLock;

/// The environment variable the device compile path reads: comma-separated names from
/// [`READING_DEFINES`], or empty / `none` for the kernel as written.
pub const WGMMA_READING_ENV: &str = "COTUNE_WGMMA_READING";

/// The kernel's reading switches, each `#define`d to 1 when chosen:
/// - `B_DESC_SWAP`: the B descriptor's leading and stride byte offsets trade roles;
/// - `META_SWAP`: threads 0 and 1 of a quad trade their metadata words;
/// - `META_XHALF`: a metadata word holds one row's 32 kept columns (16 per half) instead of
///   16 columns of rows g and g + 8;
/// - `A_SWAP`: A fragment registers 1 and 2 trade places (rows g + 8 and columns + 8).
pub const READING_DEFINES: [&str; 4] = ["B_DESC_SWAP", "META_SWAP", "META_XHALF", "A_SWAP"];

/// Parses a reading (`"B_DESC_SWAP,META_SWAP"`; empty or `none`: as written) into its
/// switches, in [`READING_DEFINES`] order.
pub fn parse_reading(text: &str) -> Result<Vec<&'static str>, String> {
    let text = text.trim();
    if text.is_empty() || text == "none" {
        return Ok(vec![]);
    }
    let mut chosen = [false; READING_DEFINES.len()];
    for name in text.split(',').map(str::trim) {
        let Some(i) = READING_DEFINES.iter().position(|d| *d == name) else {
            return Err(format!(
                "`{name}` is not a wgmma reading switch (expected a comma-separated list of {})",
                READING_DEFINES.join(", ")
            ));
        };
        chosen[i] = true;
    }
    Ok(READING_DEFINES
        .iter()
        .zip(chosen)
        .filter_map(|(d, c)| c.then_some(*d))
        .collect())
}

/// The text [`parse_reading`] reads back: the switches comma-separated, or `none`.
pub fn format_reading(switches: &[&str]) -> String {
    if switches.is_empty() {
        "none".into()
    } else {
        switches.join(",")
    }
}

/// The switches as `#define`s.
pub fn reading_defines(switches: &[&'static str]) -> Vec<(&'static str, usize)> {
    switches.iter().map(|&d| (d, 1)).collect()
}

/// The reading chosen through [`WGMMA_READING_ENV`] (none when unset), read once per process:
/// every Hopper launch asks for it, inside the benchmarks' timing loops too.
pub fn env_reading() -> Result<Vec<&'static str>, String> {
    static READING: OnceLock<Result<Vec<&'static str>, String>> = OnceLock::new();
    READING
        .get_or_init(|| {
            std::env::var(WGMMA_READING_ENV).map_or(Ok(vec![]), |v| {
                parse_reading(&v).map_err(|e| format!("{WGMMA_READING_ENV}: {e}"))
            })
        })
        .clone()
}

/// Every reading, the kernel as written first, then by the number of switches flipped: the
/// layout probe's order (it stops at the first that agrees with the reference).
pub fn reading_variants() -> Vec<Vec<&'static str>> {
    let n = READING_DEFINES.len();
    let mut masks: Vec<u32> = (0..1u32 << n).collect();
    masks.sort_by_key(|m| (m.count_ones(), *m));
    masks
        .into_iter()
        .map(|m| {
            READING_DEFINES
                .iter()
                .enumerate()
                .filter(|(i, _)| m >> i & 1 == 1)
                .map(|(_, d)| *d)
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_round_trip_and_bad_names_are_refused() {
        for v in reading_variants() {
            assert_eq!(parse_reading(&format_reading(&v)).unwrap(), v);
        }
        assert_eq!(
            parse_reading(" META_SWAP , B_DESC_SWAP ").unwrap(),
            ["B_DESC_SWAP", "META_SWAP"]
        );
        assert_eq!(parse_reading("").unwrap(), Vec::<&str>::new());
        let e = parse_reading("B_DESC_SWAP,BM").unwrap_err();
        assert!(e.contains("`BM`") && e.contains("A_SWAP"), "{e}");
    }

    #[test]
    fn the_probe_tries_every_reading_once_as_written_first() {
        let v = reading_variants();
        assert_eq!(v.len(), 16);
        assert!(v[0].is_empty());
        assert!(v[1..5].iter().all(|r| r.len() == 1));
        assert_eq!(v[15].len(), 4);
        let mut texts: Vec<String> = v.iter().map(|r| format_reading(r)).collect();
        texts.sort();
        texts.dedup();
        assert_eq!(texts.len(), 16);
    }
}
