//! The sim file's shape as serde reads it: every section and field, spanned for located
//! errors. `parse` turns it into a `Sim`.

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SimFile {
    pub(super) description: Option<String>,
    pub(super) limitation: Option<String>,
    pub(super) seeds: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) world: WorldFile,
    #[serde(default, rename = "request")]
    pub(super) requests: Vec<RequestFile>,
    #[serde(default, rename = "action")]
    pub(super) actions: Vec<ActionFile>,
    #[serde(default, rename = "inject")]
    pub(super) injects: Vec<InjectFile>,
    #[serde(default)]
    pub(super) faults: FaultsFile,
    #[serde(default, rename = "partition")]
    pub(super) partitions: Vec<PartitionFile>,
    #[serde(default)]
    pub(super) expect: ExpectFile,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FaultsFile {
    pub(super) request_drop: Option<Spanned<f64>>,
    pub(super) reply_drop: Option<Spanned<f64>>,
    pub(super) reply_drop_after_commit: Option<Spanned<f64>>,
    pub(super) duplicate: Option<Spanned<f64>>,
    pub(super) delay: Option<Spanned<f64>>,
    pub(super) delay_ms: Option<Spanned<Vec<f64>>>,
    pub(super) crash: Option<Spanned<f64>>,
    pub(super) restart_ms: Option<Spanned<f64>>,
    pub(super) gc_every_ms: Option<Spanned<f64>>,
    pub(super) duplicate_after_ms: Option<Spanned<Vec<f64>>>,
    pub(super) crash_signal: Option<Spanned<String>>,
    pub(super) commit_lost: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) effects: EffectFaultsFile,
    #[serde(default)]
    pub(super) cache: CacheFaultsFile,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct EffectFaultsFile {
    pub(super) drop: Option<Spanned<f64>>,
    pub(super) ack_drop: Option<Spanned<f64>>,
    pub(super) duplicate: Option<Spanned<f64>>,
    pub(super) error_after_success: Option<Spanned<f64>>,
    pub(super) delay: Option<Spanned<f64>>,
    pub(super) delay_ms: Option<Spanned<Vec<f64>>>,
    pub(super) decline: Option<Spanned<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CacheFaultsFile {
    pub(super) unavailable: Option<Spanned<f64>>,
    pub(super) evict: Option<Spanned<f64>>,
    pub(super) restart: Option<Spanned<f64>>,
    pub(super) reply_drop: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PartitionFile {
    pub(super) process: Spanned<usize>,
    pub(super) from_ms: Spanned<f64>,
    pub(super) for_ms: Spanned<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct WorldFile {
    /// Refused with its location: the runtime is the model's stack now.
    pub(super) event_loop: Option<Spanned<toml::Value>>,
    pub(super) connect_gap_ms: Option<Spanned<Vec<f64>>>,
    pub(super) start: Option<Spanned<String>>,
    pub(super) processes: Option<Spanned<usize>>,
    pub(super) wait_budget_ms: Option<Spanned<f64>>,
    pub(super) client_timeout_ms: Option<Spanned<f64>>,
    pub(super) latency_ms: Option<Spanned<Vec<f64>>>,
    pub(super) time_limit_ms: Option<Spanned<f64>>,
    pub(super) max_steps: Option<Spanned<u64>>,
    pub(super) effect_latency_ms: Option<Spanned<Vec<f64>>>,
    pub(super) effect_dedupe_retention_ms: Option<Spanned<f64>>,
    pub(super) clock_skew_ms: Option<Spanned<Vec<f64>>>,
    pub(super) stock: Option<Spanned<std::collections::BTreeMap<String, Spanned<i64>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RequestFile {
    pub(super) id: Spanned<String>,
    pub(super) intents: Option<Spanned<u32>>,
    pub(super) same_body: Option<Spanned<bool>>,
    pub(super) concurrent: Option<Spanned<bool>>,
    pub(super) gap_ms: Option<Spanned<f64>>,
    pub(super) timeout_ms: Option<Spanned<f64>>,
    pub(super) intent: Option<String>,
    pub(super) user: Option<String>,
    pub(super) tenant: Option<String>,
    pub(super) if_match: Option<Spanned<toml::Value>>,
    pub(super) clock_skew_ms: Option<Spanned<f64>>,
    pub(super) method: Option<String>,
    pub(super) path: Option<String>,
    pub(super) key: Option<String>,
    pub(super) body: Option<String>,
    pub(super) copies: Option<Spanned<u32>>,
    pub(super) spread_ms: Option<Spanned<Vec<f64>>>,
    pub(super) process: Option<Spanned<toml::Value>>,
    pub(super) after: Option<Spanned<toml::Value>>,
    pub(super) delay_ms: Option<Spanned<f64>>,
    pub(super) retry: Option<RetryFile>,
    pub(super) expect: Option<RequestExpectFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetryFile {
    pub(super) max_attempts: Option<Spanned<u32>>,
    pub(super) on: Option<Vec<Spanned<toml::Value>>>,
    pub(super) backoff_ms: Option<Spanned<f64>>,
    pub(super) backoff_cap_ms: Option<Spanned<f64>>,
    pub(super) jitter: Option<bool>,
    pub(super) horizon_ms: Option<Spanned<f64>>,
    pub(super) abandon_first_ms: Option<Spanned<f64>>,
    pub(super) new_key: Option<bool>,
    pub(super) body: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RequestExpectFile {
    pub(super) status: Option<Spanned<u16>>,
    pub(super) outcome: Option<Spanned<String>>,
    pub(super) replayed: Option<bool>,
    pub(super) id: Option<i64>,
    pub(super) same_id_as: Option<Spanned<String>>,
    pub(super) id_differs_from: Option<Spanned<String>>,
    pub(super) same_id: Option<bool>,
    pub(super) rows_after: Option<u64>,
    pub(super) keys_after: Option<u64>,
    pub(super) responses_after: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ActionFile {
    pub(super) id: Spanned<String>,
    pub(super) kind: Spanned<String>,
    pub(super) until: Option<Spanned<String>>,
    pub(super) for_ms: Option<Spanned<f64>>,
    pub(super) after: Option<Spanned<toml::Value>>,
    pub(super) delay_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InjectFile {
    pub(super) point: Spanned<String>,
    pub(super) action: Spanned<String>,
    pub(super) request: Option<Spanned<String>>,
    pub(super) times: Option<u32>,
    pub(super) rate: Option<Spanned<f64>>,
    pub(super) restart_ms: Option<Spanned<f64>>,
    pub(super) pause_ms: Option<Spanned<f64>>,
    pub(super) stall_ms: Option<Spanned<f64>>,
    pub(super) jump_ms: Option<Spanned<f64>>,
    pub(super) fallback: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ExpectFile {
    pub(super) rows: Option<u64>,
    pub(super) keys: Option<u64>,
    pub(super) effects: Option<u64>,
    pub(super) row_qty: Option<Vec<i64>>,
}

pub(super) fn default_body() -> String {
    r#"{"item":"test-item","qty":2}"#.to_string()
}
