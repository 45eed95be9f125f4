//! Progress on stderr for the long commands (`matrix`, `sweep`, `compare`, the bare
//! `idemsim`): runs done of all, cells done, the rate and an estimate of the time left, drawn
//! by `indicatif` from the counters the sweep's workers bump ([`crate::sweep::Progress`]).
//!
//! Shown only when stderr is a terminal and `--quiet` was not given: CI logs, pipes and tests
//! see nothing. The display only reads the counters, on a thread of its own, so it cannot
//! change a result, an output or the order of anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::sweep::{Progress, ProgressSnapshot};

/// How often the display reads the counters.
const TICK: Duration = Duration::from_millis(200);

/// How long a command runs before its progress is shown.
const DELAY: Duration = Duration::from_millis(500);

/// A progress display on stderr, for as long as it lives (dropped: cleared from the screen).
pub(crate) struct Bar {
    counters: Arc<Progress>,
    shown: Option<Shown>,
}

/// The bar and the thread that redraws it.
struct Shown {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bar {
    /// Counters for a sweep to bump (`SweepOptions::progress`), drawn as runs of `what`
    /// ("matrix", "sweep" …) when stderr is a terminal and not `--quiet`.
    pub(crate) fn start(what: &str) -> Bar {
        let counters = Arc::new(Progress::default());
        let shown = wanted().then(|| Shown::spawn(counters.clone(), what.to_string()));
        Bar { counters, shown }
    }

    /// The counters, for `SweepOptions::progress` (or for a loop that counts its own runs
    /// with [`Progress::start`] and [`Progress::run_done`]).
    pub(crate) fn counters(&self) -> Arc<Progress> {
        self.counters.clone()
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if let Some(s) = &mut self.shown {
            s.stop.store(true, Ordering::Relaxed);
            if let Some(t) = s.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// A display is wanted: stderr is a terminal and `--quiet` was not given.
fn wanted() -> bool {
    use std::io::IsTerminal;
    !super::out::quiet() && std::io::stderr().is_terminal()
}

impl Shown {
    fn spawn(counters: Arc<Progress>, what: String) -> Shown {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || draw(&counters, &what, &flag))
            .ok();
        Shown { stop, thread }
    }
}

/// Redraw the bar from the counters every [`TICK`] until told to stop, then clear it. A
/// command done within [`DELAY`] draws nothing.
fn draw(counters: &Progress, what: &str, stop: &AtomicBool) {
    let started = Instant::now();
    while started.elapsed() < DELAY {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(TICK / 4);
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(0),
        indicatif::ProgressDrawTarget::stderr_with_hz(5),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} {wide_bar} {pos}/{len} runs · {msg} · eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_prefix(what.to_string());
    while !stop.load(Ordering::Relaxed) {
        let now = counters.snapshot();
        bar.set_length(now.runs_total);
        bar.set_position(now.runs_done);
        bar.set_message(message(&now, started.elapsed()));
        std::thread::sleep(TICK);
    }
    bar.finish_and_clear();
}

/// `cells 3/48 · 1234 runs/s` (the rate alone when nothing counts cells: a shrink).
fn message(p: &ProgressSnapshot, elapsed: Duration) -> String {
    let rate = p.runs_done as f64 / elapsed.as_secs_f64().max(1e-3);
    if p.cells_total == 0 {
        return format!("{rate:.0} runs/s");
    }
    format!("cells {}/{} · {rate:.0} runs/s", p.cells_done, p.cells_total)
}

/// [`crate::sweep::run_matrix`] with the progress display (`what`: its label).
pub(super) fn run_matrix(
    what: &str,
    sims: &[Arc<crate::scenario::Sim>],
    models: &[Arc<crate::model::Model>],
    seeds: Option<std::ops::Range<u64>>,
    jobs: usize,
) -> Result<Vec<crate::sweep::Cell>, crate::run::RunError> {
    let bar = Bar::start(what);
    let opts =
        crate::sweep::SweepOptions { jobs, progress: Some(bar.counters()), ..Default::default() };
    crate::sweep::run_cells(sims, models, seeds, &opts, |_, _| {})
}
