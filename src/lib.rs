//! idemsim: a deterministic simulation testbed for idempotency protocols.
//!
//! Data path, top to bottom, no back-edges:
//! sim file + model file ([`scenario`], [`model`]) → simulated world ([`world`]: clients,
//! server processes, network, clock, SQLite, effect receiver) → event history ([`history`])
//! → checker ([`checker`]) → report ([`report`]) → CLI text/JSON ([`cli`]) and snapshots.

#[cfg(not(madsim))]
compile_error!(
    "idemsim must be built with `--cfg madsim` (see .cargo/config.toml); \
     a RUSTFLAGS environment variable replaces that setting: use RUSTFLAGS=\"--cfg madsim\""
);

pub mod catalog;
pub mod checker;
pub mod cli;
pub mod error;
pub mod history;
pub mod http;
pub mod model;
pub mod oracle;
pub mod report;
pub mod scenario;
pub mod store;
pub mod sweep;
pub mod world;

mod client;
mod keystore;
mod net;
mod relay;
pub(crate) mod server;
