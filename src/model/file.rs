//! The model file's shape as serde reads it: every section and field, spanned for located
//! errors. `parse` turns it into a `Model`.

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelFile {
    pub(super) name: Option<Spanned<String>>,
    pub(super) summary: Option<String>,
    pub(super) program: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) on_error: Vec<Spanned<String>>,
    pub(super) clean_up_on: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) key: Option<KeyFile>,
    pub(super) stack: Option<Spanned<String>>,
    /// Refused with its location: a model names its stack, whose runtime it is.
    pub(super) runtime: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) driver: DriverFile,
    pub(super) wait_budget_ms: Option<Spanned<f64>>,
    pub(super) transaction_retries: Option<Spanned<u32>>,
    pub(super) store_outcomes: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) effects: EffectsFile,
    #[serde(default)]
    pub(super) outbox: OutboxFile,
    pub(super) rows: Option<RowsFile>,
    pub(super) events: Option<EventsFile>,
    pub(super) updates: Option<Spanned<UpdatesFile>>,
    pub(super) limits: Option<Spanned<LimitsFile>>,
    /// `[notes]`: per sim name, what a reader of that cell must know (a label that reads
    /// stronger than the design's fault, a sim outside the design's use).
    #[serde(default)]
    pub(super) notes: std::collections::BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    pub(super) per_second: Spanned<u64>,
    pub(super) burst: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UpdatesFile {
    pub(super) check: Option<Spanned<String>>,
    pub(super) delete_missing: Option<Spanned<u16>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EventsFile {
    pub(super) guard: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RowsFile {
    pub(super) unique: Spanned<Vec<Spanned<String>>>,
    pub(super) on_clash: Option<Spanned<toml::Value>>,
    pub(super) enforce: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct EffectsFile {
    pub(super) dedupe: Option<Spanned<String>>,
    pub(super) timeout_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct OutboxFile {
    pub(super) relay_every_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeyFile {
    #[serde(default = "yes")]
    pub(super) required: bool,
    pub(super) max_len: Option<Spanned<usize>>,
    pub(super) scope: Option<Vec<Spanned<String>>>,
    pub(super) fingerprint: Option<Spanned<String>>,
    pub(super) on_mismatch: Option<Spanned<u16>>,
    pub(super) in_flight: Option<Spanned<toml::Value>>,
    pub(super) replay_marker: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) local_cache: bool,
    pub(super) retention_ms: Option<Spanned<f64>>,
    pub(super) store: Option<Spanned<String>>,
    pub(super) store_latency_ms: Option<Spanned<toml::Value>>,
    pub(super) store_timeout_ms: Option<Spanned<f64>>,
    pub(super) lease_ms: Option<Spanned<toml::Value>>,
    pub(super) completer_every_ms: Option<Spanned<f64>>,
    pub(super) completer_horizon_ms: Option<Spanned<f64>>,
    pub(super) completer_min_age_ms: Option<Spanned<f64>>,
    pub(super) on_store_error: Option<Spanned<u16>>,
    pub(super) on_failed_save: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) fencing: bool,
    pub(super) replay: Option<Spanned<toml::Value>>,
    pub(super) claim_conflict: Option<Spanned<String>>,
    pub(super) expiry: Option<Spanned<String>>,
    pub(super) on_expired: Option<Spanned<toml::Value>>,
    pub(super) fingerprint_fields: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) key_from: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) min_len: Option<Spanned<usize>>,
    pub(super) format: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct DriverFile {
    pub(super) awaits: Option<Spanned<String>>,
    pub(super) latency_ms: Option<Spanned<toml::Value>>,
    pub(super) statement_ms: Option<Spanned<toml::Value>>,
    pub(super) commit_ms: Option<Spanned<toml::Value>>,
    pub(super) begin: Option<Spanned<String>>,
    pub(super) journal: Option<Spanned<String>>,
    pub(super) pool: Option<Spanned<u32>>,
    pub(super) deadline_ms: Option<Spanned<f64>>,
}

/// `required` defaults to true.
fn yes() -> bool {
    true
}
