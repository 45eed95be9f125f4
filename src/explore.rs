//! Opt-in exploration (`--explore STRATEGY`): schedules drawn to find a rare violation, not
//! to measure a rate. Plain data and parsing only: the strategy as the command line spells it
//! ([`Strategy`]), what a run's explorer is told to do ([`Mode`]) and what it saw
//! ([`Explored`]). The explorer itself lives in the world (`world::explorer`), consulted by
//! every timing draw and every random route; with no strategy
//! it is not installed and a run is exactly the calibrated one. `docs/hunt.md` says what each
//! strategy does, how it replays and its limits.

use std::fmt;

/// The strategies, as `--explore` accepts them (for error messages and help).
pub const STRATEGIES: &str = "edges, swarm, faults, faults:n=N (N from 1 to 8), pct, pct:d=N (N from 1 to 8), exhaustive, exhaustive:BOUND \
                              (1 to 1000000), exhaustive:depth=D (1 to 64), \
                              exhaustive:BOUND:depth=D, exhaustive@CHOICES (one schedule, as \
                              printed)";

/// `exhaustive`'s default bound on schedules.
pub const DEFAULT_BOUND: u64 = 10_000;

/// `exhaustive`'s default depth: the decisions of a run it enumerates (later ones take their
/// first option).
pub const DEFAULT_EXHAUSTIVE_DEPTH: u32 = 12;

/// PCT's default depth.
pub const DEFAULT_DEPTH: u32 = 3;

/// The most options one exhaustive decision has (a route among more processes takes one of
/// the first 36): one character `0-9a-z` per decision in a schedule's name.
pub const MAX_ARITY: u8 = 36;

/// An exploration strategy (`--explore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// Every timing draw takes an end of its range (or a point within 1 % of one) with
    /// probability 0.8, else a uniform point.
    Edges,
    /// Swarm testing (Groce et al., ISSTA 2012): each run turns each fault kind the sim
    /// configures on or off (even odds, from the seed by its own generator, [`swarm_subset`])
    /// and draws its timing as [`Strategy::Edges`].
    Swarm,
    /// Fault points: each run fires exactly `n` of the fault draws the calibrated run of the
    /// same seed made (chosen uniformly, from the seed by its own generator, [`fault_points`])
    /// and no other; timing as calibrated.
    Faults {
        /// The faults fired per run.
        n: u32,
    },
    /// Probabilistic concurrency testing of depth `depth`.
    Pct {
        /// The bug depth d: d − 1 priority change points.
        depth: u32,
    },
    /// Every combination of the first `depth` decisions of the world, depth first, up to
    /// `bound` schedules; or one schedule (`schedule`: its choices).
    Exhaustive {
        /// Schedules explored at most (a sweep).
        bound: u64,
        /// The decisions of a run enumerated (later ones take their first option).
        depth: u32,
        /// One schedule's choices (`exhaustive@CHOICES`), for `run`.
        schedule: Option<Vec<u8>>,
    },
}

impl Strategy {
    /// Parse `--explore`'s value; the error lists the valid strategies.
    pub fn parse(s: &str) -> Result<Strategy, String> {
        let bad = |why: &str| {
            format!("--explore {}: {why}; valid strategies: {STRATEGIES}", crate::text::shown(s))
        };
        let (name, schedule) = match s.split_once('@') {
            Some((n, c)) => (n, Some(parse_choices(c).ok_or_else(|| bad("bad choices"))?)),
            None => (s, None),
        };
        let (name, arg) = match name.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (name, None),
        };
        if schedule.is_some() && name != "exhaustive" {
            return Err(bad("only exhaustive takes @CHOICES"));
        }
        match (name, arg) {
            ("edges", None) => Ok(Strategy::Edges),
            ("swarm", None) => Ok(Strategy::Swarm),
            ("faults", None) => Ok(Strategy::Faults { n: 1 }),
            ("faults", Some(a)) => match a.strip_prefix("n=").and_then(|n| n.parse::<u32>().ok()) {
                Some(n @ 1..=8) => Ok(Strategy::Faults { n }),
                _ => Err(bad("faults takes n=N with N from 1 to 8")),
            },
            ("pct", None) => Ok(Strategy::Pct { depth: DEFAULT_DEPTH }),
            ("pct", Some(a)) => match a.strip_prefix("d=").and_then(|n| n.parse::<u32>().ok()) {
                Some(d @ 1..=8) => Ok(Strategy::Pct { depth: d }),
                _ => Err(bad("pct's depth is d=N with N from 1 to 8")),
            },
            ("exhaustive", a) => {
                let (bound, depth) = exhaustive_args(a).ok_or_else(|| {
                    bad("exhaustive takes :BOUND (1 to 1000000) and/or :depth=D (1 to 64)")
                })?;
                Ok(Strategy::Exhaustive { bound, depth, schedule })
            }
            _ => Err(bad("unknown strategy")),
        }
    }

    /// The mode of one run of this strategy on `seed` (PCT's `k`: the decisions of the
    /// calibrated run of the same seed; `faults`' `k`: its fault draws).
    pub fn mode(&self, seed: u64, k: u64) -> Mode {
        match self {
            Strategy::Edges | Strategy::Swarm => Mode::Edges,
            Strategy::Faults { n } => Mode::Faults(fault_points(seed, *n, k)),
            Strategy::Pct { depth } => Mode::Pct { depth: *depth, k },
            Strategy::Exhaustive { schedule, .. } => {
                Mode::Choices(schedule.clone().unwrap_or_default())
            }
        }
    }
}

impl Strategy {
    /// For a command that runs given seeds one run each (`run`, `shrink`, `explain`): an
    /// exhaustive space is refused (one schedule is `exhaustive@CHOICES`).
    pub fn check_one_run(&self, cmd: &str) -> Result<(), String> {
        match self {
            Strategy::Exhaustive { schedule: None, .. } => Err(format!(
                "--explore {self}: {cmd} runs one schedule per seed: give it as \
                 exhaustive@CHOICES (as an exhaustive sweep prints it), or enumerate the \
                 schedules with sweep or matrix"
            )),
            _ => Ok(()),
        }
    }

    /// For a command that sweeps or enumerates (`sweep`, `matrix`): one exhaustive schedule
    /// is refused (an exhaustive sweep enumerates its schedules itself).
    pub fn check_many_runs(&self, cmd: &str) -> Result<(), String> {
        match self {
            Strategy::Exhaustive { schedule: Some(_), .. } => Err(format!(
                "--explore {self}: {cmd} enumerates schedules (exhaustive, exhaustive:BOUND, \
                 exhaustive:depth=D); one schedule replays with run --explore {self}"
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Strategy {
    /// The canonical spelling, as replay commands print it (and [`Strategy::parse`] reads).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Edges => f.write_str("edges"),
            Strategy::Swarm => f.write_str("swarm"),
            Strategy::Faults { n: 1 } => f.write_str("faults"),
            Strategy::Faults { n } => write!(f, "faults:n={n}"),
            Strategy::Pct { depth } if *depth == DEFAULT_DEPTH => f.write_str("pct"),
            Strategy::Pct { depth } => write!(f, "pct:d={depth}"),
            Strategy::Exhaustive { schedule: Some(c), .. } => {
                write!(f, "exhaustive@{}", show_choices(c))
            }
            Strategy::Exhaustive { bound, depth, .. } => {
                f.write_str("exhaustive")?;
                if *bound != DEFAULT_BOUND {
                    write!(f, ":{bound}")?;
                }
                if *depth != DEFAULT_EXHAUSTIVE_DEPTH {
                    write!(f, ":depth={depth}")?;
                }
                Ok(())
            }
        }
    }
}

/// `exhaustive`'s arguments after its first `:`: `BOUND`, `depth=D` or `BOUND:depth=D`.
fn exhaustive_args(a: Option<&str>) -> Option<(u64, u32)> {
    let (mut bound, mut depth) = (DEFAULT_BOUND, DEFAULT_EXHAUSTIVE_DEPTH);
    let Some(a) = a else { return Some((bound, depth)) };
    let parts: Vec<&str> = a.split(':').collect();
    if parts.len() > 2 {
        return None;
    }
    for (i, p) in parts.iter().enumerate() {
        match p.strip_prefix("depth=") {
            Some(d) => depth = d.parse().ok().filter(|d| (1..=64).contains(d))?,
            None if i == 0 => bound = p.parse().ok().filter(|b| (1..=1_000_000).contains(b))?,
            None => return None,
        }
    }
    Some((bound, depth))
}

/// A schedule's choices as one character each (`0-9a-z`), trailing zeros dropped (a decision
/// past the end takes its first option), at least one character.
pub fn show_choices(c: &[u8]) -> String {
    let end = c.iter().rposition(|x| *x != 0).map_or(0, |i| i + 1);
    let s: String =
        c[..end].iter().map(|x| char::from_digit(u32::from(*x), 36).unwrap_or('z')).collect();
    if s.is_empty() { "0".into() } else { s }
}

/// [`show_choices`] read back (None: a character outside `0-9a-z`, or more than 100,000).
fn parse_choices(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || s.len() > 100_000 {
        return None;
    }
    s.chars().map(|ch| ch.to_digit(36).map(|d| d as u8)).collect()
}

/// Swarm's subset for one seed: each of `kinds` (in order) with whether it is on, each on with
/// probability 1/2. Drawn by splitmix64 from the seed, never from madsim's rng: choosing the
/// subset does not move the run's own stream of draws, and (seed, kinds) alone decide it.
pub fn swarm_subset(seed: u64, kinds: &[&'static str]) -> Vec<(&'static str, bool)> {
    // A fixed offset so that seed 0 does not start the generator at 0.
    let mut state = seed ^ 0x5357_4152_4d00_0001;
    kinds.iter().map(|k| (*k, splitmix64(&mut state) >> 63 == 1)).collect()
}

/// `faults`' points for one seed: `n` distinct fault draws (1-based, ascending) among the `k`
/// of the calibrated run (all of them when `k <= n`), drawn by splitmix64 from the seed (a
/// partial Fisher–Yates shuffle), never from madsim's rng.
pub fn fault_points(seed: u64, n: u32, k: u64) -> Vec<u64> {
    let mut state = seed ^ 0x4641_554c_5453_0001;
    let n = u64::from(n).min(k);
    let mut picked: Vec<u64> = Vec::with_capacity(n as usize);
    // Floyd's algorithm: n distinct values of 1..=k in n steps, whatever k is.
    for j in (k - n + 1)..=k {
        let t = 1 + splitmix64(&mut state) % j;
        picked.push(if picked.contains(&t) { j } else { t });
    }
    picked.sort_unstable();
    picked
}

/// Swarm's top edges for one seed: for each of `kinds` (in order), whether its rate is pushed
/// to 1.0 when it is on (probability 1/2), by a generator of its own (the subset of
/// [`swarm_subset`] is the same with or without it).
pub fn swarm_top(seed: u64, kinds: &[&'static str]) -> Vec<bool> {
    let mut state = seed ^ 0x544f_5045_4447_0001;
    kinds.iter().map(|_| splitmix64(&mut state) >> 63 == 1).collect()
}

/// One step of splitmix64 (Steele, Lea and Flood, OOPSLA 2014): a small, well-mixed
/// generator, deterministic on every platform.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What a run's explorer is told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Count the decisions and change nothing: the calibrated run, its `k` for PCT.
    Count,
    /// [`Strategy::Edges`].
    Edges,
    /// [`Strategy::Pct`], with `k` decisions among which the change points fall.
    Pct {
        /// d.
        depth: u32,
        /// The decisions the change points are drawn among (at least 1).
        k: u64,
    },
    /// One exhaustive schedule: the choices of its first decisions (past them: option 0).
    Choices(Vec<u8>),
    /// [`Strategy::Faults`]: the fault draws (1-based) that fire; every other one does not.
    Faults(Vec<u64>),
}

/// What the explorer saw in one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Explored {
    /// Decisions with more than one option the world made (timing draws over a range, random
    /// routes).
    pub decisions: u64,
    /// Exhaustive: every decision's (choice, options), in order.
    pub taken: Vec<(u8, u8)>,
    /// PCT: the tasks given priorities (client copies) and the change points drawn.
    pub tasks: u32,
    /// PCT: the decisions (1-based) at which the running task's priority drops.
    pub change_points: Vec<u64>,
    /// Fault draws the world made (a fault with a rate strictly between 0 and 1 asked
    /// whether it happens), in any mode.
    pub fault_draws: u64,
    /// `faults`: the fault draws (1-based) that fired.
    pub fired: Vec<u64>,
}

impl Explored {
    /// The next schedule depth first after this one (None: the space is exhausted): the last
    /// decision with an option left takes its next option, and every decision after it
    /// starts again from its first.
    /// Only the first `depth` decisions are enumerated.
    pub fn next_schedule(&self, depth: u32) -> Option<Vec<u8>> {
        let within = &self.taken[..self.taken.len().min(depth as usize)];
        let i = within.iter().rposition(|(c, n)| c + 1 < *n)?;
        let mut next: Vec<u8> = self.taken[..i].iter().map(|(c, _)| *c).collect();
        next.push(self.taken[i].0 + 1);
        Some(next)
    }

    /// The choices this run took (its name: `exhaustive@…`).
    pub fn choices(&self) -> Vec<u8> {
        self.taken.iter().map(|(c, _)| *c).collect()
    }
}

/// PCT's guarantee: a bug of depth d is found with probability at least 1/(n·k^(d−1)) per
/// run (n tasks, k decisions); None when there is no task or no decision.
pub fn pct_bound(tasks: u32, k: u64, depth: u32) -> Option<f64> {
    (tasks > 0 && k > 0)
        .then(|| 1.0 / (f64::from(tasks) * (k as f64).powi(depth.saturating_sub(1) as i32)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_parse_and_print_back() {
        for s in [
            "edges",
            "swarm",
            "pct",
            "pct:d=2",
            "exhaustive",
            "exhaustive:50",
            "exhaustive:depth=3",
            "exhaustive:50:depth=20",
            "exhaustive@01z",
        ] {
            assert_eq!(Strategy::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(Strategy::parse("pct:d=3").unwrap().to_string(), "pct");
        for bad in [
            "",
            "edge",
            "pct:3",
            "pct:d=0",
            "pct:d=9",
            "exhaustive:0",
            "exhaustive:depth=0",
            "exhaustive:1:2",
            "edges@1",
            "swarm:1",
            "swarm@1",
            "x@!",
        ] {
            let e = Strategy::parse(bad).unwrap_err();
            assert!(e.contains("valid strategies: edges"), "{e}");
        }
    }

    #[test]
    fn schedules_enumerate_depth_first() {
        let e = Explored { taken: vec![(0, 2), (1, 2), (0, 3)], ..Default::default() };
        assert_eq!(e.next_schedule(12), Some(vec![0, 1, 1]));
        assert_eq!(e.next_schedule(2), Some(vec![1]));
        let e = Explored { taken: vec![(0, 2), (1, 2), (2, 3)], ..Default::default() };
        assert_eq!(e.next_schedule(12), Some(vec![1]));
        let e = Explored { taken: vec![(1, 2), (1, 2)], ..Default::default() };
        assert_eq!(e.next_schedule(12), None);
        assert_eq!(show_choices(&[0, 1, 0, 0]), "01");
        assert_eq!(show_choices(&[0, 0]), "0");
    }

    #[test]
    fn swarm_subsets_are_fixed_by_the_seed_and_vary_over_seeds() {
        let kinds = ["a", "b", "c"];
        assert_eq!(swarm_subset(7, &kinds), swarm_subset(7, &kinds));
        assert!(swarm_subset(7, &[]).is_empty());
        let on: Vec<usize> =
            (0..3).map(|i| (0..64).filter(|s| swarm_subset(*s, &kinds)[i].1).count()).collect();
        // Even odds: each kind on in about half of 64 seeds.
        assert!(on.iter().all(|n| (16..=48).contains(n)), "{on:?}");
    }
}
