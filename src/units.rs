//! Units of model time. The world keeps time in microseconds (`u64`); files and output speak
//! milliseconds, with fractions down to one microsecond. Imports nothing from the crate.

/// The longest duration a file may state, in ms: 30 days. Model time is kept in
/// microseconds, so every sum of durations stays far from overflow.
pub const MAX_MS: u64 = 2_592_000_000;

/// Milliseconds as written (an integer or a fraction down to 0.001 ms) → microseconds; None
/// when negative, not finite, finer than 1 µs or longer than [`MAX_MS`].
pub fn ms_to_us(ms: f64) -> Option<u64> {
    if !ms.is_finite() || !(0.0..=MAX_MS as f64).contains(&ms) {
        return None;
    }
    let us = ms * 1000.0;
    let whole = us.round();
    ((us - whole).abs() <= 1e-6 * us.max(1.0)).then_some(whole as u64)
}

/// Microseconds shown as milliseconds: `3`, `0.25`, `0.005`.
pub fn show_ms(us: u64) -> String {
    if us.is_multiple_of(1000) {
        (us / 1000).to_string()
    } else {
        let s = format!("{}.{:03}", us / 1000, us % 1000);
        s.trim_end_matches('0').to_string()
    }
}

/// A duration for people: `24 h`, `90 s`, `2.3 s`, `1.5 ms`, `250 µs` (at most three
/// decimals, trailing zeros trimmed).
pub fn show_duration(us: u64) -> String {
    let (unit, scale) = match us {
        u if u >= 3_600_000_000 => ("h", 3_600_000_000.0),
        u if u >= 60_000_000 => ("min", 60_000_000.0),
        u if u >= 1_000_000 => ("s", 1_000_000.0),
        u if u >= 1_000 => ("ms", 1_000.0),
        _ => ("µs", 1.0),
    };
    let v = format!("{:.3}", us as f64 / scale);
    format!("{} {unit}", v.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_largest_unit() {
        assert_eq!(show_duration(86_400_000_000), "24 h");
        assert_eq!(show_duration(90_000_000), "1.5 min");
        assert_eq!(show_duration(2_300_000), "2.3 s");
        assert_eq!(show_duration(1_500), "1.5 ms");
        assert_eq!(show_duration(250), "250 µs");
        assert_eq!(show_duration(0), "0 µs");
    }

    #[test]
    fn milliseconds_down_to_a_microsecond() {
        assert_eq!(ms_to_us(2.0), Some(2000));
        assert_eq!(ms_to_us(0.05), Some(50));
        assert_eq!(ms_to_us(0.001), Some(1));
        assert_eq!(ms_to_us(0.0), Some(0));
        assert_eq!(ms_to_us(0.0005), None);
        assert_eq!(ms_to_us(-1.0), None);
        assert_eq!(ms_to_us(f64::NAN), None);
        assert_eq!(ms_to_us(MAX_MS as f64), Some(MAX_MS * 1000));
        assert_eq!(ms_to_us(MAX_MS as f64 + 1.0), None);
        assert_eq!(
            (show_ms(3000), show_ms(250), show_ms(5), show_ms(1500)),
            ("3".into(), "0.25".into(), "0.005".into(), "1.5".into())
        );
    }
}
