//! Key records and where they live: the SQLite `keys` table (transactional, shared), a TTL
//! cache (Redis-like: shared, every operation a network round trip, records expire), or each
//! process's memory (lost on restart). The step interpreter calls these operations; which
//! store answers is the model's `key.store`.

use std::collections::BTreeMap;
use std::time::Duration;

use madsim::rand::Rng;
use madsim::time::sleep;
use rusqlite::{OptionalExtension, params};

use crate::model::KeyStore;
use crate::server::{Exec, Failure};
use crate::store;

/// (user, operation, key), with unscoped fields stored as "".
pub(crate) type Scope = (String, String, String);

/// A key record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub fingerprint: String,
    pub status: Option<i64>,
    pub response: Option<String>,
    /// `in-progress` or `done`.
    pub state: String,
    pub created_ms: u64,
    pub lease_until_ms: Option<u64>,
    pub token: Option<u64>,
    pub intent: String,
}

/// The in-memory stores of a run (cache shared by all processes; memory per process).
#[derive(Debug, Default)]
pub(crate) struct MemStores {
    pub cache: BTreeMap<Scope, Record>,
    pub memory: Vec<BTreeMap<Scope, Record>>,
}

impl Exec {
    fn scope(&self) -> Scope {
        let k = self.key.as_ref().expect("key present");
        (k.user.clone(), k.operation.clone(), k.key.clone())
    }

    fn store_kind(&self) -> KeyStore {
        self.world.model.key.as_ref().map(|k| k.store).unwrap_or(KeyStore::Sqlite)
    }

    /// A cache operation is a network round trip: it yields the event loop and takes time.
    async fn cache_trip(&self) {
        self.release_loop();
        let (lo, hi) = self.world.model.key.as_ref().map(|k| k.store_latency_ms).unwrap_or((1, 3));
        let ms = madsim::rand::thread_rng().gen_range(lo..=hi);
        sleep(Duration::from_millis(ms.max(1))).await;
    }

    /// Run `f` on the map that holds this request's records (cache or this process's memory),
    /// after dropping expired cache records (recorded as collected).
    fn with_map<T>(&self, f: impl FnOnce(&mut BTreeMap<Scope, Record>) -> T) -> T {
        let now = self.world.now_us() / 1000;
        let retention = self.world.model.key.as_ref().and_then(|k| k.retention_ms);
        let mut st = self.world.lock();
        let st = &mut *st;
        match self.store_kind() {
            KeyStore::Cache => {
                if let Some(ttl) = retention {
                    let expired: Vec<Scope> =
                        st.mem.cache.iter().filter(|(_, r)| r.created_ms + ttl <= now).map(|(k, _)| k.clone()).collect();
                    for k in expired {
                        if let Some(r) = st.mem.cache.remove(&k) {
                            st.collected.push((r.intent, now));
                        }
                    }
                }
                f(&mut st.mem.cache)
            }
            _ => f(&mut st.mem.memory[self.idx]),
        }
    }

    pub(crate) async fn ks_lookup(&self) -> Result<Option<Record>, Failure> {
        let scope = self.scope();
        match self.store_kind() {
            KeyStore::Sqlite => {
                let (user, op, key) = scope;
                self.sql("lookup", |c| {
                    c.prepare_cached(
                        "SELECT fingerprint, status, response, state, created_ms, lease_until_ms, token, intent
                         FROM keys WHERE user = ?1 AND operation = ?2 AND key = ?3",
                    )?
                    .query_row(params![user, op, key], |r| {
                        Ok(Record {
                            fingerprint: r.get(0)?,
                            status: r.get(1)?,
                            response: r.get(2)?,
                            state: r.get(3)?,
                            created_ms: r.get::<_, i64>(4)? as u64,
                            lease_until_ms: r.get::<_, Option<i64>>(5)?.map(|v| v as u64),
                            token: r.get::<_, Option<i64>>(6)?.map(|v| v as u64),
                            intent: r.get(7)?,
                        })
                    })
                    .optional()
                })
                .await
            }
            KeyStore::Cache => {
                self.cache_trip().await;
                Ok(self.with_map(|m| m.get(&scope).cloned()))
            }
            KeyStore::Memory => Ok(self.with_map(|m| m.get(&scope).cloned())),
        }
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

    /// Insert this request's in-progress claim if no record exists. `true`: claimed.
    pub(crate) async fn ks_claim(&self) -> Result<bool, Failure> {
        let rec = self.new_record(None);
        let scope = self.scope();
        match self.store_kind() {
            KeyStore::Sqlite => {
                let (user, op, key) = scope;
                self.sql("claim", |c| {
                    c.prepare_cached(
                        "INSERT INTO keys(user, operation, key, fingerprint, status, response, state, created_ms, lease_until_ms, token, intent)
                         VALUES (?1, ?2, ?3, ?4, NULL, NULL, 'in-progress', ?5, ?6, ?7, ?8)",
                    )?
                    .execute(params![
                        user,
                        op,
                        key,
                        rec.fingerprint,
                        rec.created_ms as i64,
                        rec.lease_until_ms.map(|v| v as i64),
                        rec.token.map(|v| v as i64),
                        rec.intent
                    ])
                    .map(|_| true)
                    .or_else(|e| if store::is_constraint(&e) { Ok(false) } else { Err(e) })
                })
                .await
            }
            KeyStore::Cache => {
                self.cache_trip().await; // SET key value NX EX ttl
                Ok(self.with_map(|m| {
                    if let std::collections::btree_map::Entry::Vacant(e) = m.entry(scope) {
                        e.insert(rec);
                        true
                    } else {
                        false
                    }
                }))
            }
            KeyStore::Memory => Ok(self.with_map(|m| {
                if let std::collections::btree_map::Entry::Vacant(e) = m.entry(scope) {
                    e.insert(rec);
                    true
                } else {
                    false
                }
            })),
        }
    }

    /// Take over an in-progress claim whose lease has expired (compare-and-set on its token).
    pub(crate) async fn ks_takeover(&self, old: &Record) -> Result<bool, Failure> {
        let now = self.world.now_us() / 1000;
        let lease = self.world.model.key.as_ref().and_then(|k| k.lease_ms).unwrap_or(0);
        let (me, until) = (self.id, now + lease);
        let scope = self.scope();
        let old_token = old.token;
        match self.store_kind() {
            KeyStore::Sqlite => {
                let (user, op, key) = scope;
                let n = self
                    .sql("claim", |c| {
                        c.prepare_cached(
                            "UPDATE keys SET token = ?4, lease_until_ms = ?5
                             WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress'
                               AND lease_until_ms <= ?6 AND token IS ?7",
                        )?
                        .execute(params![user, op, key, me as i64, until as i64, now as i64, old_token.map(|v| v as i64)])
                    })
                    .await?;
                Ok(n == 1)
            }
            kind => {
                if kind == KeyStore::Cache {
                    self.cache_trip().await;
                }
                Ok(self.with_map(|m| match m.get_mut(&scope) {
                    Some(r) if r.state == "in-progress" && r.lease_until_ms.is_some_and(|l| l <= now) && r.token == old_token => {
                        r.token = Some(me);
                        r.lease_until_ms = Some(until);
                        true
                    }
                    _ => false,
                }))
            }
        }
    }

    /// Complete this request's claim with its outcome. With fencing, only while this request
    /// still owns the claim. Returns the number of records updated.
    pub(crate) async fn ks_complete(&self, status: u16, body: &str) -> Result<usize, Failure> {
        let fencing = self.world.model.key.as_ref().is_some_and(|k| k.fencing);
        let me = self.id;
        let scope = self.scope();
        let body = body.to_string();
        match self.store_kind() {
            KeyStore::Sqlite => {
                let (user, op, key) = scope;
                let sql = if fencing {
                    "UPDATE keys SET status = ?4, response = ?5, state = 'done', lease_until_ms = NULL
                     WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress' AND token = ?6"
                } else {
                    "UPDATE keys SET status = ?4, response = ?5, state = 'done', lease_until_ms = NULL
                     WHERE user = ?1 AND operation = ?2 AND key = ?3 AND ?6 = ?6"
                };
                self.sql("save-response", |c| c.prepare_cached(sql)?.execute(params![user, op, key, status, body, me as i64]))
                    .await
            }
            kind => {
                if kind == KeyStore::Cache {
                    self.cache_trip().await; // SET key value EX ttl (a CAS script with fencing)
                }
                let rec = self.new_record(Some((status, &body)));
                Ok(self.with_map(|m| match m.get(&scope) {
                    Some(r) if fencing && !(r.state == "in-progress" && r.token == Some(me)) => 0,
                    None if fencing => 0,
                    Some(r) => {
                        let mut rec = rec;
                        rec.created_ms = r.created_ms;
                        rec.intent = r.intent.clone();
                        m.insert(scope, rec);
                        1
                    }
                    None => {
                        m.insert(scope, rec);
                        1
                    }
                }))
            }
        }
    }

    /// Store a done record without a prior claim. SQLite: a primary-key clash is an error;
    /// cache and memory: the last writer wins (SET overwrites).
    pub(crate) async fn ks_insert_done(&self, status: u16, body: &str) -> Result<(), Failure> {
        let rec = self.new_record(Some((status, body)));
        let scope = self.scope();
        match self.store_kind() {
            KeyStore::Sqlite => {
                let (user, op, key) = scope;
                self.sql("save-response", |c| {
                    c.prepare_cached(
                        "INSERT INTO keys(user, operation, key, fingerprint, status, response, state, created_ms, intent)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'done', ?7, ?8)",
                    )?
                    .execute(params![user, op, key, rec.fingerprint, status, rec.response, rec.created_ms as i64, rec.intent])
                })
                .await?;
                Ok(())
            }
            kind => {
                if kind == KeyStore::Cache {
                    self.cache_trip().await;
                }
                self.with_map(|m| m.insert(scope, rec));
                Ok(())
            }
        }
    }

    /// Delete this request's own in-progress claim (on error, so a retry can run).
    pub(crate) async fn ks_release(&self) -> Result<usize, Failure> {
        let me = self.id;
        let scope = self.scope();
        match self.store_kind() {
            KeyStore::Sqlite => {
                let (user, op, key) = scope;
                self.sql("release-claim", |c| {
                    c.prepare_cached(
                        "DELETE FROM keys WHERE user = ?1 AND operation = ?2 AND key = ?3 AND state = 'in-progress' AND token = ?4",
                    )?
                    .execute(params![user, op, key, me as i64])
                })
                .await
            }
            kind => {
                if kind == KeyStore::Cache {
                    self.cache_trip().await;
                }
                Ok(self.with_map(|m| match m.get(&scope) {
                    Some(r) if r.state == "in-progress" && r.token == Some(me) => {
                        m.remove(&scope);
                        1
                    }
                    _ => 0,
                }))
            }
        }
    }
}
