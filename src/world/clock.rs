//! Model time over madsim's clock.
//!
//! madsim never sleeps less than 1 ms (`sleep_until` takes `deadline.max(now + 1 ms)`), and the
//! systems idemsim models act in microseconds (a loopback round trip, an event-loop turn, an
//! SQLite statement). So model time runs on a scale: **one microsecond of model time is one
//! millisecond of madsim's clock**. Every duration the world waits goes through this module;
//! the smallest wait is 1 µs of model time, and [`yield_now`] is a scheduling point that costs
//! no model time at all (madsim's 50–100 ns poll advance is 0.05–0.1 ns of model time). madsim
//! still draws every scheduling decision from the run's seed, so determinism is unchanged.
//!
//! Nothing outside this module calls `madsim::time` (checked by `tidy`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

pub(crate) use madsim::time::Instant;

/// The start of a run (madsim's clock).
pub(crate) fn now() -> Instant {
    Instant::now()
}

/// A model duration (µs) as a madsim duration.
pub(crate) fn span(us: u64) -> Duration {
    Duration::from_millis(us)
}

/// A run's clock: madsim's time handle, read directly rather than through `Instant::now()`
/// (madsim's `clock_gettime` override looks the runtime up and clones its handle on every
/// call). Same readings: madsim's instants are its elapsed time over a fixed base.
pub(crate) struct RunClock {
    handle: madsim::time::TimeHandle,
    /// madsim's elapsed time when the run started.
    start: Duration,
}

impl RunClock {
    /// The clock of the current runtime, starting now.
    pub(crate) fn start() -> RunClock {
        let handle = madsim::time::TimeHandle::current();
        let start = handle.elapsed();
        RunClock { handle, start }
    }

    /// Model time elapsed since the start (µs).
    pub(crate) fn elapsed_us(&self) -> u64 {
        (self.handle.elapsed() - self.start).as_millis() as u64
    }
}

/// Wait `us` of model time; 0 is a zero-time scheduling point.
pub(crate) async fn sleep_us(us: u64) {
    if us == 0 { yield_now().await } else { madsim::time::sleep(span(us)).await }
}

/// Run `f` for at most `us` of model time.
pub(crate) async fn timeout_us<F: Future>(us: u64, f: F) -> Option<F::Output> {
    madsim::time::timeout(span(us), f).await.ok()
}

/// A madsim sleep until model time `at_us` since `start`, as a future to poll by hand.
pub(crate) fn sleep_future(start: Instant, at_us: u64) -> Pin<Box<madsim::time::Sleep>> {
    Box::pin(madsim::time::sleep_until(start + span(at_us)))
}

/// Give way once: every other task that is ready now may run before this one continues, in an
/// order drawn from the seed, and no model time passes.
pub(crate) fn yield_now() -> YieldNow {
    YieldNow(false)
}

pub(crate) struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
