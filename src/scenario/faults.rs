//! The `[faults]` section and the `[[partition]]` windows, one named parser per part.

use toml::Spanned;

use super::file::{CacheFaultsFile, EffectFaultsFile, SimFile};
use super::*;
use crate::input::{InputError, Source};

/// The `[faults]` section and the `[[partition]]` windows.
pub(super) fn parse_faults(
    file: Source,
    f: &SimFile,
    processes: usize,
) -> Result<Faults, InputError> {
    let rate = |r: &Option<Spanned<f64>>, what: &str| fault_rate(file, r, what);
    let ff = &f.faults;
    let delay_us = file.ms_range(
        "faults.delay_ms",
        &ff.delay_ms,
        (10_000, 500_000),
        |lo, hi| lo <= hi,
        "[low, high] with low <= high",
    )?;
    let partitions = parse_partitions(file, f, processes)?;
    let effects = parse_effect_faults(file, &ff.effects)?;
    let cache = parse_cache_faults(file, &ff.cache)?;
    let crash_signal = file
        .choice(
            &ff.crash_signal,
            "faults.crash_signal",
            &[("reset", CrashSignal::Reset), ("silence", CrashSignal::Silence)],
        )?
        .unwrap_or_default();
    Ok(Faults {
        effects,
        cache,
        crash_signal,
        commit_lost: rate(&ff.commit_lost, "commit_lost")?,
        duplicate_after_us: file.ms_range(
            "faults.duplicate_after_ms",
            &ff.duplicate_after_ms,
            (0, 25_000),
            |lo, hi| lo <= hi,
            "[low, high] with low <= high",
        )?,
        request_drop: rate(&ff.request_drop, "request_drop")?,
        reply_drop: rate(&ff.reply_drop, "reply_drop")?,
        reply_drop_after_commit: rate(&ff.reply_drop_after_commit, "reply_drop_after_commit")?,
        duplicate: rate(&ff.duplicate, "duplicate")?,
        delay: rate(&ff.delay, "delay")?,
        delay_us,
        crash: rate(&ff.crash, "crash")?,
        restart_us: file.ms("faults.restart_ms", &ff.restart_ms, 100_000, 0)?,
        gc_every_us: ff
            .gc_every_ms
            .is_some()
            .then(|| file.ms("faults.gc_every_ms", &ff.gc_every_ms, 0, 1))
            .transpose()?,
        partitions,
    })
}

/// A fault's rate: a probability (0.0 when absent), named `faults.<what>` in errors.
fn fault_rate(file: Source, r: &Option<Spanned<f64>>, what: &str) -> Result<f64, InputError> {
    match r {
        None => Ok(0.0),
        Some(r) if (0.0..=1.0).contains(r.get_ref()) => Ok(*r.get_ref()),
        Some(r) => Err(file.err(
            r.span(),
            format!("faults.{what} = {}: expected a probability in 0.0..=1.0", r.get_ref()),
        )),
    }
}

/// The `[[partition]]` windows: a process (1-based) cut off from `from_ms` for `for_ms`.
fn parse_partitions(
    file: Source,
    f: &SimFile,
    processes: usize,
) -> Result<Vec<Partition>, InputError> {
    let mut partitions = Vec::new();
    for p in &f.partitions {
        if !(1..=processes).contains(p.process.get_ref()) {
            return Err(
                file.err(p.process.span(), format!("partition.process: expected 1..={processes}"))
            );
        }
        let some = |v: &Spanned<f64>| Some(v.clone());
        partitions.push(Partition {
            process: p.process.get_ref() - 1,
            from_us: file.ms("partition.from_ms", &some(&p.from_ms), 0, 0)?,
            for_us: file.ms("partition.for_ms", &some(&p.for_ms), 0, 0)?,
        });
    }
    Ok(partitions)
}

/// `[faults.effects]`: what goes wrong between the server and the effect provider.
fn parse_effect_faults(file: Source, e: &EffectFaultsFile) -> Result<EffectFaults, InputError> {
    let rate = |r: &Option<Spanned<f64>>, what: &str| fault_rate(file, r, what);
    Ok(EffectFaults {
        drop: rate(&e.drop, "effects.drop")?,
        ack_drop: rate(&e.ack_drop, "effects.ack_drop")?,
        duplicate: rate(&e.duplicate, "effects.duplicate")?,
        error_after_success: rate(&e.error_after_success, "effects.error_after_success")?,
        delay: rate(&e.delay, "effects.delay")?,
        delay_us: file.ms_range(
            "faults.effects.delay_ms",
            &e.delay_ms,
            (100_000, 2_000_000),
            |lo, hi| lo <= hi,
            "[low, high] with low <= high",
        )?,
        decline: rate(&e.decline, "effects.decline")?,
    })
}

/// `[faults.cache]`: what goes wrong with the key cache.
fn parse_cache_faults(file: Source, c: &CacheFaultsFile) -> Result<CacheFaults, InputError> {
    let rate = |r: &Option<Spanned<f64>>, what: &str| fault_rate(file, r, what);
    Ok(CacheFaults {
        unavailable: rate(&c.unavailable, "cache.unavailable")?,
        evict: rate(&c.evict, "cache.evict")?,
        restart: rate(&c.restart, "cache.restart")?,
        reply_drop: rate(&c.reply_drop, "cache.reply_drop")?,
    })
}
