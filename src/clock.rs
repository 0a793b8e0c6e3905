//! Wall-clock time as Unix time, read one way everywhere (a time before the epoch reads 0).

use std::time::{SystemTime, UNIX_EPOCH};

/// Whole seconds from the epoch to `time`.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Milliseconds from the epoch to `time`.
pub fn unix_millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// Whole seconds from the epoch to now.
pub fn now_seconds() -> u64 {
    unix_seconds(SystemTime::now())
}

/// Milliseconds from the epoch to now.
pub fn now_millis() -> u64 {
    unix_millis(SystemTime::now())
}

/// Seconds from the epoch to now, with their fraction (for gauges).
pub fn now_fractional() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}
