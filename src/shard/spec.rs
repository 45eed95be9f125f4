//! Which slice this process runs: `--shard K/N`, or `auto` with the index (and count) from a
//! batch engine's environment (Kubernetes, Slurm, AWS Batch, GitLab).

use serde::{Deserialize, Serialize};

/// Which shard this process runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardSpec {
    /// This shard's index K, 0-based (K < N).
    pub k: u64,
    /// The number of shards N the work is split into.
    pub n: u64,
    /// Where K came from: `--shard` or the engine's variable.
    pub source: String,
}

/// The engines' index variables, read by `--shard auto[/N]`.
pub const ENGINE_VARS: [&str; 9] = [
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_STEP",
    "AWS_BATCH_JOB_ARRAY_INDEX",
    "AWS_BATCH_JOB_ARRAY_SIZE",
    "CI_NODE_INDEX",
    "CI_NODE_TOTAL",
];

/// Parse `--shard K/N`, `auto/N` or `auto` (the index, and the count if the engine says it,
/// from `env`).
pub fn parse_spec(arg: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<ShardSpec, String> {
    let num = |s: &str, what: &str| -> Result<u64, String> {
        s.trim().parse::<u64>().map_err(|_| format!("--shard {arg}: {what} `{s}` is not a number"))
    };
    let (k_part, n_part) = match arg.split_once('/') {
        Some((k, n)) => (k, Some(n)),
        None => (arg, None),
    };
    let n_given = n_part.map(|n| num(n, "N")).transpose()?;
    let spec = if k_part == "auto" {
        auto(env, n_given)?
    } else {
        let n = n_given.ok_or_else(|| format!("--shard {arg}: expected K/N or auto[/N]"))?;
        ShardSpec { k: num(k_part, "K")?, n, source: "--shard".into() }
    };
    if spec.n == 0 || spec.k >= spec.n {
        return Err(format!(
            "--shard: shard {} of {} does not exist; expected 0 <= K < N (from {})",
            spec.k, spec.n, spec.source
        ));
    }
    if let Some(n) = n_given
        && n != spec.n
    {
        return Err(format!("--shard: {} says {} shards, the argument {n}", spec.source, spec.n));
    }
    Ok(spec)
}

/// The index from whichever engine set its variables; an error if none or several that
/// disagree.
pub(super) fn auto(
    env: &dyn Fn(&str) -> Option<String>,
    n: Option<u64>,
) -> Result<ShardSpec, String> {
    let get = |v: &str| -> Result<Option<u64>, String> {
        env(v)
            .map(|s| {
                s.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("--shard auto: {v}=`{s}` is not a number"))
            })
            .transpose()
    };
    let mut found: Vec<ShardSpec> = Vec::new();
    if let Some(k) = get("JOB_COMPLETION_INDEX")? {
        // Kubernetes exports the index, not the number of completions.
        let n = n.ok_or(
            "--shard auto: Kubernetes does not export the number of completions; \
                         use --shard auto/N",
        )?;
        found.push(ShardSpec { k, n, source: "JOB_COMPLETION_INDEX".into() });
    }
    if let Some(spec) = slurm(&get, n)? {
        found.push(spec);
    }
    if let Some(k) = get("AWS_BATCH_JOB_ARRAY_INDEX")? {
        let n = match get("AWS_BATCH_JOB_ARRAY_SIZE")? {
            Some(s) => s,
            None => {
                n.ok_or("--shard auto: AWS_BATCH_JOB_ARRAY_SIZE is not set; use --shard auto/N")?
            }
        };
        found.push(ShardSpec { k, n, source: "AWS_BATCH_JOB_ARRAY_INDEX/SIZE".into() });
    }
    if let Some(i) = get("CI_NODE_INDEX")? {
        // GitLab counts from 1.
        let k = i.checked_sub(1).ok_or("--shard auto: CI_NODE_INDEX counts from 1")?;
        let n = match get("CI_NODE_TOTAL")? {
            Some(t) => t,
            None => n.ok_or("--shard auto: CI_NODE_TOTAL is not set; use --shard auto/N")?,
        };
        found.push(ShardSpec { k, n, source: "CI_NODE_INDEX/TOTAL".into() });
    }
    match found.as_slice() {
        [] => Err("--shard auto: no engine index variable is set (looked for \
                   JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID, AWS_BATCH_JOB_ARRAY_INDEX, \
                   CI_NODE_INDEX)"
            .into()),
        [one] => Ok(one.clone()),
        [first, rest @ ..] => {
            if rest.iter().all(|s| s.k == first.k && s.n == first.n) {
                Ok(first.clone())
            } else {
                let all: Vec<String> =
                    found.iter().map(|s| format!("{} = {}/{}", s.source, s.k, s.n)).collect();
                Err(format!("--shard auto: engine variables disagree: {}", all.join(", ")))
            }
        }
    }
}

/// A Slurm array task's index (from its MIN) and count, if Slurm set its variables.
pub(super) fn slurm(
    get: &dyn Fn(&str) -> Result<Option<u64>, String>,
    n: Option<u64>,
) -> Result<Option<ShardSpec>, String> {
    let Some(id) = get("SLURM_ARRAY_TASK_ID")? else { return Ok(None) };
    let min = get("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
    if get("SLURM_ARRAY_TASK_STEP")?.is_some_and(|s| s != 1) {
        return Err("--shard auto: a Slurm array with a step other than 1 (use --array=A-B)".into());
    }
    let n = match get("SLURM_ARRAY_TASK_COUNT")? {
        Some(c) => c,
        None => n.ok_or("--shard auto: SLURM_ARRAY_TASK_COUNT is not set; use --shard auto/N")?,
    };
    let k = id.checked_sub(min).ok_or("--shard auto: SLURM_ARRAY_TASK_ID below its MIN")?;
    let source = if get("SLURM_ARRAY_TASK_COUNT")?.is_some() {
        "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT"
    } else {
        "SLURM_ARRAY_TASK_ID"
    };
    Ok(Some(ShardSpec { k, n, source: source.into() }))
}
