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

#[cfg(test)]
mod tests {
    use super::*;

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
