//! Key records and where they live: the SQLite `keys` table (transactional, shared), a TTL
//! cache (Redis-like: shared, every operation a network round trip, records expire), or each
//! process's memory (lost on restart). The step interpreter calls these operations; which
//! store answers is the model's `key.store`. Each operation is written once for SQLite and
//! once for the in-memory maps (cache and memory differ only in the round trip and expiry).

use std::collections::BTreeMap;
use std::time::Duration;

use madsim::rand::Rng;
use madsim::time::sleep;
use rusqlite::{OptionalExtension, params};

use crate::model::KeyStore;
use crate::server::{Exec, Failure};
use crate::store::{self, RECORD_COLUMNS, Record, Scope};

/// The in-memory stores of a run (cache shared by all processes; memory per process).
#[derive(Debug, Default)]
pub(crate) struct MemStores {
    pub cache: BTreeMap<Scope, Record>,
    pub memory: Vec<BTreeMap<Scope, Record>>,
}

/// A parameter for an optional integer column.
fn opt_i64(v: Option<u64>) -> Option<i64> {
    v.map(|v| v as i64)
}

impl Exec {
    fn scope(&self) -> Scope {
        self.key.clone().expect("key present")
    }

    fn store_kind(&self) -> KeyStore {
        self.world.model.key.as_ref().map(|k| k.store).unwrap_or(KeyStore::Sqlite)
    }

    /// Run `f` on the map that holds this request's records. For the cache that is a network
    /// round trip (it yields the event loop and takes time) and expired records are dropped
    /// first (recorded as collected); for process memory it is immediate.
    async fn on_map<T>(&self, f: impl FnOnce(&mut BTreeMap<Scope, Record>) -> T) -> T {
        let kp = self.world.model.key.as_ref().expect("key policy");
        if kp.store == KeyStore::Cache {
            self.release_loop();
            let (lo, hi) = kp.store_latency_ms;
            let ms = madsim::rand::thread_rng().gen_range(lo..=hi);
            sleep(Duration::from_millis(ms.max(1))).await;
        }
        let now = self.world.now_us() / 1000;
        let mut st = self.world.lock();
        let st = &mut *st;
        match kp.store {
            KeyStore::Cache => {
                if let Some(ttl) = kp.retention_ms {
                    let collected = &mut st.collected;
                    st.mem.cache.retain(|_, r| {
                        let live = r.created_ms + ttl > now;
                        if !live {
                            collected.push((r.intent.clone(), now));
                        }
                        live
                    });
                }
                f(&mut st.mem.cache)
            }
            _ => f(&mut st.mem.memory[self.idx]),
        }
    }

    pub(crate) async fn ks_lookup(&self) -> Result<Option<Record>, Failure> {
        let scope = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            return Ok(self.on_map(|m| m.get(&scope).cloned()).await);
        }
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM keys WHERE user = ?1 AND operation = ?2 AND key = ?3"
        );
        self.sql("lookup", |c| {
            c.prepare_cached(&sql)?
                .query_row(params![scope.0, scope.1, scope.2], |r| store::record_from_row(r, 0))
                .optional()
        })
        .await
    }

    /// A new record for this request, in progress (a claim) or done (a saved response).
    fn new_record(&self, done: Option<(u16, &str)>) -> Record {
        let now = self.world.now_us() / 1000;
        let lease = self.world.model.key.as_ref().and_then(|k| k.lease_ms);
        Record {
            fingerprint: self.fingerprint.clone(),
            status: done.map(|d| d.0 as i64),
            response: done.map(|d| d.1.to_string()),
            state: if done.is_some() { "done".into() } else { "in-progress".into() },
            created_ms: now,
            lease_until_ms: if done.is_none() { lease.map(|l| now + l) } else { None },
            token: Some(self.id),
            intent: self.intent.clone(),
        }
    }

    /// Insert `rec` under this request's key. A claim (`claim`) only succeeds if no record
    /// exists (`false` otherwise: SQLite's unique key, the cache's `SET NX`). A done record
    /// without a claim: SQLite's primary-key clash is an error; cache and memory overwrite
    /// (`SET`: the last writer wins).
    async fn ks_insert(&self, what: &str, rec: Record, claim: bool) -> Result<bool, Failure> {
        let scope = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            return Ok(self
                .on_map(|m| {
                    if claim && m.contains_key(&scope) {
                        return false;
                    }
                    m.insert(scope, rec);
                    true
                })
                .await);
        }
        self.sql(what, |c| {
            c.prepare_cached(
                "INSERT INTO keys(user, operation, key, fingerprint, status, response, state, created_ms, lease_until_ms, token, intent)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                scope.0,
                scope.1,
                scope.2,
                rec.fingerprint,
                rec.status,
                rec.response,
                rec.state,
                rec.created_ms as i64,
                opt_i64(rec.lease_until_ms),
                opt_i64(rec.token),
                rec.intent
            ])
            .map(|_| true)
            .or_else(|e| if claim && store::is_constraint(&e) { Ok(false) } else { Err(e) })
        })
        .await
    }

    /// Insert this request's in-progress claim if no record exists. `true`: claimed.
    pub(crate) async fn ks_claim(&self) -> Result<bool, Failure> {
        self.ks_insert("claim", self.new_record(None), true).await
    }

    /// Store a done record without a prior claim (see [`Exec::ks_insert`]).
    pub(crate) async fn ks_insert_done(&self, status: u16, body: &str) -> Result<(), Failure> {
        self.ks_insert("save-response", self.new_record(Some((status, body))), false)
            .await
            .map(|_| ())
    }

    /// Take over an in-progress claim whose lease has expired (compare-and-set on its token).
    pub(crate) async fn ks_takeover(&self, old: &Record) -> Result<bool, Failure> {
        let now = self.world.now_us() / 1000;
        let lease = self.world.model.key.as_ref().and_then(|k| k.lease_ms).unwrap_or(0);
        let (me, until, old_token) = (self.id, now + lease, old.token);
        let scope = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            return Ok(self
                .on_map(|m| match m.get_mut(&scope) {
                    Some(r)
                        if r.state == "in-progress"
                            && r.lease_until_ms.is_some_and(|l| l <= now)
                            && r.token == old_token =>
                    {
                        r.token = Some(me);
                        r.lease_until_ms = Some(until);
                        true
                    }
                    _ => false,
                })
                .await);
        }
        let n = self
            .sql("claim", |c| {
                c.prepare_cached(
                    "UPDATE keys SET token = ?4, lease_until_ms = ?5
                     WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress'
                       AND lease_until_ms <= ?6 AND token IS ?7",
                )?
                .execute(params![
                    scope.0,
                    scope.1,
                    scope.2,
                    me as i64,
                    until as i64,
                    now as i64,
                    opt_i64(old_token)
                ])
            })
            .await?;
        Ok(n == 1)
    }

    /// Complete this request's claim with its outcome. With fencing, only while this request
    /// still owns the claim. Returns the number of records updated.
    pub(crate) async fn ks_complete(&self, status: u16, body: &str) -> Result<usize, Failure> {
        let fencing = self.world.model.key.as_ref().is_some_and(|k| k.fencing);
        let me = self.id;
        let scope = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            // SET key value EX ttl (a compare-and-set script with fencing).
            let rec = self.new_record(Some((status, body)));
            return Ok(self
                .on_map(|m| match m.get(&scope) {
                    Some(r) if fencing && !(r.state == "in-progress" && r.token == Some(me)) => 0,
                    None if fencing => 0,
                    old => {
                        let mut rec = rec;
                        if let Some(r) = old {
                            rec.created_ms = r.created_ms;
                            rec.intent = r.intent.clone();
                        }
                        m.insert(scope, rec);
                        1
                    }
                })
                .await);
        }
        let owner =
            if fencing { " AND state = 'in-progress' AND token = ?6" } else { " AND ?6 = ?6" };
        let sql = format!(
            "UPDATE keys SET status = ?4, response = ?5, state = 'done', lease_until_ms = NULL
             WHERE user = ?1 AND operation = ?2 AND key = ?3{owner}"
        );
        self.sql("save-response", |c| {
            c.prepare_cached(&sql)?
                .execute(params![scope.0, scope.1, scope.2, status, body, me as i64])
        })
        .await
    }

    /// Delete this request's own in-progress claim (on error, so a retry can run).
    pub(crate) async fn ks_release(&self) -> Result<usize, Failure> {
        let me = self.id;
        let scope = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            return Ok(self
                .on_map(|m| match m.get(&scope) {
                    Some(r) if r.state == "in-progress" && r.token == Some(me) => {
                        m.remove(&scope);
                        1
                    }
                    _ => 0,
                })
                .await);
        }
        self.sql("release-claim", |c| {
            c.prepare_cached(
                "DELETE FROM keys WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress' AND token = ?4",
            )?
            .execute(params![scope.0, scope.1, scope.2, me as i64])
        })
        .await
    }
}
