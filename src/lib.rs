//! idemsim: a deterministic simulation testbed for idempotency protocols.
//!
//! Data path, top to bottom, no back-edges:
//! sim file + model file ([`scenario`], [`model`], via [`catalog`]) → simulated world
//! ([`world`]: clients, server processes, network, clock, SQLite, effect receiver; the only
//! code that imports madsim or rusqlite) → [`report::Observation`] and the typed event
//! [`history`] → judges ([`expect`] for the sim's expectations, [`oracle`] for the
//! invariants) → [`report::RunReport`] ([`run`]) → many seeds ([`sweep`]) → text, tables and
//! JSON ([`render`]) → the command line ([`cli`]) and insta snapshots.
//! `ARCHITECTURE.md` maps the code and states its invariants.

#![warn(missing_docs)]

#[cfg(not(madsim))]
compile_error!(
    "idemsim must be built with `--cfg madsim` (see .cargo/config.toml); \
     a RUSTFLAGS environment variable replaces that setting: use RUSTFLAGS=\"--cfg madsim\""
);

// Inputs: files → checked values.
pub mod catalog;
pub mod http;
pub mod input;
pub mod library;
pub mod model;
pub mod outfile;
pub mod scenario;
pub mod text;
pub mod units;

// One run's world.
pub mod world;

// Judging: pure functions of (sim, model, observation).
pub mod expect;
pub mod history;
pub mod oracle;
pub mod picture;
pub mod report;
pub mod run;

// The second world: real servers, real sockets, wall-clock time (never used by a simulated run).
pub mod real;

// Many runs and the front end.
pub mod agree;
pub mod baseline;
pub mod cli;
pub mod compare;
pub mod explain;
pub mod explore;
pub mod fuzz;
pub mod lesson;
pub mod moments;
pub mod render;
pub mod shard;
pub mod shrink;
pub mod sweep;
