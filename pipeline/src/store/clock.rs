//! Wall-clock helpers for unique folder suffixes and timestamps.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch (unique-enough suffixes).
pub fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
