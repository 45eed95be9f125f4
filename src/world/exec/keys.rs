//! The key protocol of an execution: the key read from the request, claims and takeovers,
//! lookups and what a hit answers, waiting for an original, saving the outcome, the error
//! path's clean-up of a claim, and the key store behind one helper (`on_map` for a cache or
//! process memory, SQL for SQLite).

use std::collections::BTreeMap;

use super::{Claim, Exec, Flow, WAIT_POLL_US, in_flight};
use crate::history::{Refusal, Stmt, What};
use crate::http::{self, Order, Reason, Response};
use crate::model::{
    ClaimCleanup, ClaimConflict, Expiry, FailureKind, Fingerprint, InFlight, KeyStore, Lease,
    Replay, Rollback, StoreOutcomes,
};
use crate::report::Collected;
use crate::report::{KeyRecord, RecordState, Scope};
use crate::world::keystore::{self, Abandoned, Takeover};
use crate::world::net::Envelope;
use crate::world::runner::{Failure, Why};
use crate::world::shared::{chance, draw};
use crate::world::{clock, store};

impl Exec {
    /// `lookup`: a miss runs on; a failed record with this payload is taken back; a hit is answered.
    pub(super) async fn step_lookup(&mut self) -> Result<Flow, Failure> {
        if self.key.is_none() {
            return Ok(Flow::Next);
        }
        match self.key_lookup_live().await? {
            None => {
                self.event(What::LookupMiss);
                Ok(Flow::Next)
            }
            // A failed record with this payload: take it back and run again.
            Some(r) if r.state == RecordState::Failed && r.fingerprint == self.fingerprint => {
                self.event(What::FoundFailed);
                self.retake_failed().await
            }
            Some(r) => self.on_hit(r).await,
        }
    }

    /// `save-response`: the pending reply stored under the key.
    pub(super) async fn save_response(&mut self) -> Result<Flow, Failure> {
        let Some(resp) = self.response.clone() else {
            return Err(Failure::Error(Why::SaveBeforeInsert));
        };
        self.save(resp.status, &resp.body).await?;
        Ok(Flow::Next)
    }

    /// `recovery-point:<name>`: remembered in this request's claim.
    pub(super) async fn recovery_point(&mut self, point: &str) -> Result<Flow, Failure> {
        if self.claim == Claim::Unclaimed {
            return Ok(Flow::Next);
        }
        let (s, me, row) = (self.scope(), self.run.id, self.row_id);
        self.run
            .sql(Stmt::RecoveryPoint, |c| keystore::sql_save_recovery(c, &s, me, point, row))
            .await?;
        self.event(What::RecoveryPointSaved { point: point.to_string() });
        Ok(Flow::Next)
    }

    /// The key policy's checks on the `Idempotency-Key` header; sets the key and fingerprint.
    pub(super) fn read_key(&mut self, env: &Envelope, order: &Order) -> Result<(), Response> {
        let Some(kp) = &self.run.world.model.key else { return Ok(()) };
        // A key derived from the payload (the header is not read).
        let derived = kp
            .key_from
            .as_ref()
            .map(|f| format!("payload:{}", http::sha256_hex(order.selected(f).as_bytes())));
        let header = match &derived {
            Some(d) => Some(d.as_str()),
            None => env.http.header(http::KEY_HEADER),
        };
        match header {
            None | Some("") if kp.required => {
                self.event(What::Rejected(Refusal::MissingKey));
                Err(Response::error(400, "missing Idempotency-Key"))
            }
            None | Some("") => Ok(()),
            Some(k) if derived.is_none() && k.chars().count() > kp.max_len => {
                self.event(What::Rejected(Refusal::KeyTooLong));
                Err(Response::error(400, "Idempotency-Key too long"))
            }
            Some(k) if derived.is_none() && k.chars().count() < kp.min_len => {
                self.event(What::Rejected(Refusal::KeyTooShort));
                Err(Response::error(400, "Idempotency-Key too short"))
            }
            Some(k) if derived.is_none() && kp.uuid && !http::is_uuid(k) => {
                self.event(What::Rejected(Refusal::KeyFormat));
                Err(Response::error(400, "Idempotency-Key is not a UUID"))
            }
            Some(k) => {
                self.key = Some(std::rc::Rc::new(Scope {
                    user: match (kp.scope_tenant, kp.scope_user) {
                        (false, true) => order.user.clone(),
                        (false, false) => String::new(),
                        (true, u) => format!(
                            "{}/{}",
                            order.tenant.as_deref().unwrap_or(""),
                            if u { order.user.as_str() } else { "" }
                        ),
                    },
                    operation: if kp.scope_operation {
                        order.operation.to_string()
                    } else {
                        String::new()
                    },
                    key: k.to_string(),
                }));
                self.fingerprint = match kp.fingerprint {
                    Fingerprint::Validated => match &kp.fingerprint_fields {
                        None => http::sha256_hex(order.canonical().as_bytes()),
                        Some(f) => http::sha256_hex(order.selected(f).as_bytes()),
                    },
                    Fingerprint::Raw => http::sha256_hex(&env.http.body),
                    Fingerprint::None => String::new(),
                    Fingerprint::Parsed => {
                        let body = http::js_reserialized(&env.http.body).unwrap_or_default();
                        http::sha256_hex(body.as_bytes())
                    }
                };
                Ok(())
            }
        }
    }

    /// When a claim written now is leased until (this process's clock): `lease_ms` from now,
    /// or, with `lease_ms = "deadline"`, the execution's deadline.
    pub(super) fn lease_until(&self) -> Option<u64> {
        let kp = self.key_policy();
        Some(match kp.lease {
            Lease::None => return None,
            Lease::ToDeadline(us) => self.admitted_app_us.saturating_add(us),
            Lease::For(us) => self.app_now().saturating_add(us),
        })
    }

    /// The completer: take the abandoned claim over and run its program on from its recovery
    /// point, as the request that was abandoned would have; the outcome is stored under the
    /// key like any request's, and the reply goes nowhere. The status, if it took the claim.
    pub async fn complete_abandoned(&mut self, a: Abandoned) -> Option<u16> {
        let next = self.world().model.resume_index(&a.point)?;
        let (s, now) = (a.scope.clone(), self.app_now());
        let lease = self.key_policy().lease.duration_us().unwrap_or(0);
        let t = Takeover {
            me: self.run.id,
            until_us: now.saturating_add(lease),
            now_us: now,
            old_token: a.token,
        };
        let took = self.run.sql(Stmt::Claim, |c| keystore::sql_takeover(c, &s, t)).await.ok()?;
        if !took {
            return None;
        }
        self.event(What::CompleterTookOver { intent: a.intent.clone(), key: a.scope.key.clone() });
        (self.admitted_us, self.admitted_app_us) = (self.world().now_us(), now);
        self.key = Some(std::rc::Rc::new(a.scope));
        self.fingerprint = a.fingerprint;
        self.hold_claim();
        self.row_id = Some(a.row);
        self.response = Some(Response::new(201, a.order.created_body(a.row)));
        self.order = Some(a.order);
        self.event(What::Resumed { point: a.point, row: Some(a.row) });
        let resp = self.run_program(next).await;
        self.event(What::CompleterFinished { status: resp.status });
        Some(resp.status)
    }

    /// After a takeover: continue after the recovery point the claim remembers (with its
    /// row and the reply it implies), if any.
    pub(super) async fn resume(&mut self) -> Result<(), Failure> {
        let s = self.scope();
        let Some((point, row)) =
            self.run.sql(Stmt::RecoveryPoint, |c| keystore::sql_recovery(c, &s)).await?
        else {
            return Ok(());
        };
        let Some(next) = self.world().model.resume_index(&point) else { return Ok(()) };
        if let (Some(id), Some(o)) = (row, &self.order) {
            self.row_id = Some(id);
            self.response = Some(Response::new(201, o.created_body(id)));
        }
        self.event(What::Resumed { point, row });
        self.resume_at = Some(next);
        Ok(())
    }

    /// A `failed` record with this request's payload: take it back as this request's claim
    /// (`UPDATE … SET state = 'in-progress' WHERE state = 'failed'`) and run the program.
    /// Another retry that took it back first makes this one a duplicate in flight (409).
    pub(super) async fn retake_failed(&mut self) -> Result<Flow, Failure> {
        let (s, me) = (self.scope(), self.run.id);
        let lease = self.lease_until();
        let took =
            self.run.sql(Stmt::Claim, |c| keystore::sql_retake_failed(c, &s, me, lease)).await?;
        if !took {
            self.event(What::AlreadyClaimed);
            return Ok(Flow::Finish(in_flight(409)));
        }
        self.hold_claim();
        self.event(What::RetookFailed);
        Ok(Flow::Next)
    }

    /// `claim`: insert an in-progress record if none exists; a conflict is answered like a
    /// lookup hit, unless the record's lease expired and this request can take it over.
    /// (A request that took a failed record back at its lookup has its claim already.)
    pub(super) async fn claim(&mut self) -> Result<Flow, Failure> {
        if self.key.is_none() || self.claim != Claim::Unclaimed {
            return Ok(Flow::Next);
        }
        if self.key_claim().await? {
            self.hold_claim();
            self.event(What::Claimed);
            return Ok(Flow::Next);
        }
        if self.key_policy().claim_conflict == ClaimConflict::Error {
            self.event(What::ClaimUniqueFailed);
            return Err(Failure::Error(Why::ClaimUnique));
        }
        match self.key_lookup_live().await? {
            Some(rec)
                if rec.state == RecordState::Failed && rec.fingerprint == self.fingerprint =>
            {
                self.retake_failed().await
            }
            Some(rec) => {
                let now = self.app_now();
                let expired = rec.state == RecordState::InProgress
                    && rec.lease_until_us.is_some_and(|l| l <= now);
                if expired && rec.fingerprint == self.fingerprint && self.key_takeover(&rec).await?
                {
                    self.hold_claim();
                    self.event(What::TookOver);
                    if self.world().model.has_recovery_points() {
                        self.resume().await?;
                    }
                    return Ok(Flow::Next);
                }
                self.event(What::AlreadyClaimed);
                self.on_hit(rec).await
            }
            // The record had expired and was deleted on read: claim the key anew (once).
            None if self.key_policy().expiry.on_read() && self.key_claim().await? => {
                self.hold_claim();
                self.event(What::Claimed);
                Ok(Flow::Next)
            }
            None => {
                self.event(What::ClaimGone);
                Ok(Flow::Finish(
                    Response::error(409, "request in progress").meaning(Reason::InFlight),
                ))
            }
        }
    }

    /// A stored record was found: replay, mismatch, or in flight.
    pub(super) async fn on_hit(&mut self, mut rec: KeyRecord) -> Result<Flow, Failure> {
        // The policy borrowed from the model (an Arc), not cloned for every hit.
        let model = self.run.world.model.clone();
        let kp = model.key.as_ref().expect("key steps need a key policy (checked at load)");
        if self.expired {
            self.event(What::ExpiredGone);
            return Ok(Flow::Finish(
                Response::error(410, "Idempotency-Key expired").meaning(Reason::Expired),
            ));
        }
        if rec.fingerprint != self.fingerprint {
            self.event(What::Mismatch { status: kp.on_mismatch });
            return Ok(Flow::Finish(
                Response::error(kp.on_mismatch, "Idempotency-Key reused with a different payload")
                    .meaning(Reason::Mismatch),
            ));
        }
        if rec.state != RecordState::Done {
            match kp.in_flight {
                InFlight::Status(s) => {
                    self.event(What::InFlight { status: s });
                    return Ok(Flow::Finish(in_flight(s)));
                }
                InFlight::Proceed => {
                    self.event(What::InFlightIgnored);
                    return Ok(Flow::Next);
                }
                InFlight::Wait => match self.wait_for_original().await? {
                    Some(done) => rec = done,
                    None => {
                        return Ok(Flow::Finish(in_flight(409)));
                    }
                },
            }
        }
        if let Replay::Status(s) = kp.replay {
            self.event(What::HitCompleted { status: s });
            return Ok(Flow::Finish(
                Response::error(s, "request with this Idempotency-Key already processed")
                    .meaning(Reason::AlreadyDone),
            ));
        }
        let status = rec.status.unwrap_or(500) as u16;
        self.event(What::Replayed { status });
        let mut resp = Response::new(status, rec.response.unwrap_or_default());
        // A stored business refusal keeps its meaning when it is replayed.
        if status == 409 && resp.body == http::TAKEN_BODY {
            resp.meta.reason = Some(Reason::Taken);
        }
        if !kp.replay_marker.is_empty() {
            resp.headers.push((kp.replay_marker.clone().into(), "true".into()));
        }
        Ok(Flow::Finish(resp))
    }

    /// `in_flight = "wait"`: poll the record every 10 ms up to the wait budget; the completed
    /// record, or None (gone, or still in progress at the budget).
    pub(super) async fn wait_for_original(&mut self) -> Result<Option<KeyRecord>, Failure> {
        self.event(What::WaitingForOriginal);
        let mut waited = 0;
        loop {
            if waited >= self.world().wait_budget_us {
                return Ok(None);
            }
            if !self.world().spend() {
                return Err(Failure::Bound);
            }
            self.run.wait(clock::sleep_us(WAIT_POLL_US)).await;
            waited += WAIT_POLL_US;
            match self.key_lookup().await? {
                Some(r) if r.state == RecordState::Done => return Ok(Some(r)),
                // The original failed: nothing to replay; the client may retry.
                Some(r) if r.state == RecordState::Failed => return Ok(None),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    /// Record (status, body) under the key: complete our claim, or insert a new record.
    pub(super) async fn save(&mut self, status: u16, body: &str) -> Result<(), Failure> {
        if self.key.is_none() {
            return Ok(());
        }
        match self.claim {
            Claim::Unclaimed => {
                self.key_insert(Stmt::SaveResponse, self.new_record(Some((status, body))), false)
                    .await?;
                self.event(What::Stored { status });
            }
            Claim::Held | Claim::CompletedInTx | Claim::Completed => {
                let done = self.key_complete(status, body).await;
                self.save_failed = done.is_err();
                if done? == 0 {
                    let fencing = self.key_policy().fencing;
                    self.event(What::SaveRefused { fencing });
                    return Err(Failure::Error(Why::SaveRefused { fencing }));
                }
                self.event(What::ClaimCompleted { status });
                self.claim = match self.run.conn.is_autocommit() {
                    true => Claim::Completed,
                    false => Claim::CompletedInTx,
                };
            }
        }
        // `local_cache`: keep a copy once the record is durable (outside a transaction).
        if self.key_policy().local_cache
            && (self.store_kind() != KeyStore::Sqlite || self.run.conn.is_autocommit())
        {
            let s = self.scope();
            self.local_put(&s, self.new_record(Some((status, body))));
        }
        Ok(())
    }

    /// The error path: roll back if the model says so, record the error if the model stores
    /// all outcomes, answer 503 (busy) or 500.
    pub(super) async fn fail(&mut self, f: Failure) -> Response {
        let model = self.run.world.model.clone();
        // A completion that was never committed is undone: by the rollback below or by the
        // end of the connection's transaction, or by a COMMIT lost and rolled back. The error
        // path then treats the claim as the database holds it (in progress), as its
        // conditional SQL (`WHERE state = 'in-progress' AND token = own`) would.
        if self.claim == Claim::CompletedInTx
            && (!self.run.conn.is_autocommit() || self.run.commit_rolled_back.get())
        {
            self.claim = Claim::Held;
        }
        self.roll_back_on_error();
        let kind = f.kind();
        let declined = matches!(f, Failure::Declined);
        let provider_failed =
            matches!(f, Failure::Error(Why::ProviderError | Why::EffectUnacknowledged));
        let resp = match f {
            Failure::Busy => {
                Response::error(503, "database busy, safe to retry").meaning(Reason::SafeToRetry)
            }
            // The design answers a failed dependency call with a final 503 of its own.
            Failure::Error(why)
                if provider_failed && model.store_outcomes == StoreOutcomes::Dependency =>
            {
                self.event(What::Failed { why: why.to_string() });
                Response::error(503, "error from payment processor")
            }
            Failure::Error(why) => {
                self.event(What::Failed { why: why.to_string() });
                Response::error(500, "internal error")
            }
            Failure::Bound => Response::error(500, "internal error"),
            Failure::Declined => {
                self.event(What::Failed { why: "the provider declined".into() });
                Response::error(402, "declined")
            }
            Failure::RateLimited => {
                let mut r = Response::error(429, "rate limited");
                r.headers.push(("Retry-After".into(), "1".into()));
                r
            }
            Failure::StoreUnavailable => match self.key.as_ref().map(|_| self.key_policy()) {
                // The design fails closed on purpose: nothing was done, retry.
                Some(kp) if kp.on_store_error == 503 => {
                    Response::error(503, "key store unavailable, safe to retry")
                        .meaning(Reason::SafeToRetry)
                }
                Some(kp) => {
                    self.event(What::Failed { why: "the key store failed".into() });
                    Response::error(kp.on_store_error, "internal error")
                }
                None => Response::error(500, "internal error"),
            },
        };
        // A save of the outcome that failed, in a design that then leaves its claim alone.
        let keep = self.save_failed && model.key.as_ref().is_some_and(|k| k.keep_on_failed_save);
        if keep {
            self.event(What::ClaimKept);
            return resp;
        }
        let store = match model.store_outcomes {
            StoreOutcomes::All => true,
            StoreOutcomes::Refusals => declined,
            StoreOutcomes::Dependency => declined || provider_failed,
            StoreOutcomes::Success => false,
        };
        self.clean_up_claim(store, &resp, kind).await;
        resp
    }

    /// The error path's ROLLBACK, as the model says: of this request's own transaction, or of
    /// whatever transaction the connection has open (`rollback-any`).
    pub(super) fn roll_back_on_error(&mut self) {
        let mine = self.in_tx();
        match self.run.world.model.on_error.rollback {
            Rollback::Own if mine => {
                let _ = store::exec_cached(&self.run.conn, "ROLLBACK");
                self.event(What::Rollback);
            }
            // The design's own unconditional ROLLBACK: whoever began the transaction.
            Rollback::Any if !self.run.conn.is_autocommit() => {
                let _ = store::exec_cached(&self.run.conn, "ROLLBACK");
                self.event(if mine { What::Rollback } else { What::RollbackOthers });
            }
            _ => {}
        }
    }

    /// The error path's work on this request's claim, if it holds one it has not completed:
    /// store the failure as the key's outcome (`store`), or the model's `on_error` clean-up
    /// (release it, mark it failed, or unlock it for a takeover) if it runs after a failure of
    /// this `kind` (`clean_up_on`).
    pub(super) async fn clean_up_claim(&mut self, store: bool, resp: &Response, kind: FailureKind) {
        if self.claim != Claim::Held {
            return;
        }
        if store {
            let _ = self.save(resp.status, &resp.body.clone()).await;
            return;
        }
        if !self.run.world.model.on_error.cleans_up_after(kind) {
            // `clean_up_on`: the design's code does not clean up after this kind of failure.
            self.event(What::ClaimLeftAfter { failure: kind.name() });
            return;
        }
        let (s, me) = (self.scope(), self.run.id);
        match self.run.world.model.on_error.claim {
            ClaimCleanup::Keep => {}
            ClaimCleanup::Release => {
                if let Ok(n) = self.key_release().await {
                    self.event(What::ClaimReleased { n });
                }
            }
            ClaimCleanup::ReleaseKey => {
                if let Ok(n) = self.key_release().await {
                    self.event(What::KeyReleased { n });
                }
            }
            ClaimCleanup::MarkFailed => {
                let marked =
                    self.run.sql(Stmt::MarkFailed, |c| keystore::sql_mark_failed(c, &s, me)).await;
                if let Ok(n) = marked {
                    self.event(What::MarkedFailed { n });
                }
            }
            ClaimCleanup::Unlock => {
                let unlocked =
                    self.run.sql(Stmt::Unlock, |c| keystore::sql_unlock(c, &s, me)).await;
                if let Ok(n) = unlocked {
                    self.event(What::ClaimUnlocked { n });
                }
            }
        }
    }

    pub(super) fn scope(&self) -> std::rc::Rc<Scope> {
        self.key.clone().expect("key present")
    }

    pub(super) fn store_kind(&self) -> KeyStore {
        self.run.world.model.key.as_ref().map(|k| k.store).unwrap_or(KeyStore::Sqlite)
    }

    /// Run `f` on the map that holds this request's records. Process memory answers at
    /// once. The cache is a network round trip (an await) through its faults: refused at
    /// once, unreachable from a partitioned process (the client times out), restarted empty or
    /// the key evicted before its TTL, the operation applied but its reply lost; expired
    /// records are dropped first. A record that disappears is recorded as collected.
    pub(super) async fn on_map<T>(
        &self,
        scope: &Scope,
        f: impl FnOnce(&mut BTreeMap<Scope, KeyRecord>) -> T,
    ) -> Result<T, Failure> {
        let kp = self.key_policy();
        if kp.store != KeyStore::Cache {
            let mut st = self.world().lock();
            return Ok(f(st.processes[self.run.idx].memory_of(self.run.worker)));
        }
        let faults = &self.world().sim.faults.cache;
        if chance(faults.unavailable) {
            self.event(What::CacheRefused);
            return Err(Failure::StoreUnavailable);
        }
        if self.world().is_partitioned(self.run.idx) {
            self.event(What::CacheUnreachable);
            self.run.wait(clock::sleep_us(kp.store_timeout_us)).await;
            return Err(Failure::StoreUnavailable);
        }
        let (at_store, back) = self.store_trip(draw(kp.store_latency_us));
        self.run.wait(clock::sleep_us(at_store)).await;
        let (restart, evict) = (chance(faults.restart), chance(faults.evict));
        let now = self.world().now_us();
        let (out, evicted) = {
            let mut st = self.world().lock();
            let st = &mut *st;
            if restart {
                st.collected.extend(st.cache.iter().map(|(s, r)| Collected::of(s, r, now)));
                st.cache.clear();
            }
            if let Some(ttl) = kp.retention_us {
                keystore::map_expire(&mut st.cache, ttl, now, &mut st.collected);
            }
            let evicted = if evict { st.cache.remove(scope) } else { None };
            if let Some(r) = &evicted {
                st.collected.push(Collected::of(scope, r, now));
            }
            (f(&mut st.cache), evicted.is_some())
        };
        if restart {
            self.event(What::CacheRestarted);
        }
        if evicted {
            self.event(What::CacheEvicted);
        }
        self.run.wait(clock::sleep_us(back)).await;
        if chance(faults.reply_drop) {
            self.event(What::CacheReplyLost);
            let rest = kp.store_timeout_us.saturating_sub(kp.store_latency_us.max());
            self.run.wait(clock::sleep_us(rest)).await;
            return Err(Failure::StoreUnavailable);
        }
        Ok(out)
    }

    /// One command's trip to the key store and back, its round trip `rtt` drawn: (µs until it
    /// reaches the store, where it runs; µs from then until its reply is back). A command runs
    /// at the store half its round trip after it was sent, and its reply takes the other
    /// half. An event loop keeps one connection to the store (a Redis client pipelines every
    /// command on one socket), FIFO both ways: a command never reaches the store before the
    /// one sent ahead of it on that connection, nor its reply before the reply ahead of it, so
    /// a burst's lookups, all sent before any claim, all run before it (measured: docs/
    /// packages.md). A thread per request has a connection of its own per request.
    fn store_trip(&self, rtt: u64) -> (u64, u64) {
        let now = self.world().now_us();
        let (mut at, mut back) = (now + rtt / 2, now + rtt);
        if self.world().model.loop_times().is_some() {
            let mut st = self.world().lock();
            let conn = &mut st.processes[self.run.idx].store_conn;
            at = at.max(conn.0);
            back = back.max(conn.1).max(at + (rtt - rtt / 2));
            *conn = (at, back);
        }
        (at - now, back - at)
    }

    pub(super) async fn key_lookup(&self) -> Result<Option<KeyRecord>, Failure> {
        let s = self.scope();
        let local = self.key_policy().local_cache;
        if local && let Some(r) = self.local_get(&s) {
            self.event(What::LocalCacheHit);
            return Ok(Some(r));
        }
        let found = if self.store_kind() != KeyStore::Sqlite {
            self.on_map(&s, |m| keystore::map_lookup(m, &s)).await?
        } else {
            self.run.sql(Stmt::Lookup, |c| keystore::sql_lookup(c, &s)).await?
        };
        if local && let Some(r) = found.as_ref().filter(|r| r.state == RecordState::Done) {
            self.local_put(&s, r.clone());
        }
        Ok(found)
    }

    /// `local_cache`: this process's copy of a completed record, unless it has expired.
    pub(super) fn local_get(&self, s: &Scope) -> Option<KeyRecord> {
        let now = if self.store_kind() == KeyStore::Cache {
            self.world().now_us()
        } else {
            self.app_now()
        };
        let ttl = self.key_policy().retention_us;
        let mut st = self.world().lock();
        let local = st.processes[self.run.idx].local_of(self.run.worker);
        match local.get(s) {
            Some(r) if ttl.is_none_or(|t| r.created_us.saturating_add(t) > now) => Some(r.clone()),
            Some(_) => {
                local.remove(s);
                None
            }
            None => None,
        }
    }

    pub(super) fn local_put(&self, s: &Scope, r: KeyRecord) {
        self.world().lock().processes[self.run.idx].local_of(self.run.worker).insert(s.clone(), r);
    }

    /// A lookup that honours a per-record expiry (`expiry = "on-read"`): a record whose
    /// `created_us + retention` has passed on this process's clock is deleted (the deletion
    /// counts as a collection) and reads as absent; with `on_expired = 410` it stays, as a
    /// tombstone that `on_hit` answers 410 Gone.
    pub(super) async fn key_lookup_live(&mut self) -> Result<Option<KeyRecord>, Failure> {
        let rec = self.key_lookup().await?;
        let kp = self.key_policy();
        let (Some(r), true, Some(retention)) = (&rec, kp.expiry.on_read(), kp.retention_us) else {
            return Ok(rec);
        };
        if r.created_us.saturating_add(retention) > self.app_now() {
            return Ok(rec);
        }
        if kp.expiry == Expiry::OnReadGone {
            self.expired = true;
            return Ok(rec);
        }
        let (s, created) = (self.scope(), r.created_us);
        let n =
            self.run.sql(Stmt::Lookup, |c| keystore::sql_delete_expired(c, &s, created)).await?;
        if n > 0 {
            let now = self.world().now_us();
            self.world().lock().collected.push(Collected::of(&s, r, now));
            self.event(What::KeyExpired { intent: r.intent.clone() });
        }
        Ok(None)
    }

    /// The time on this process's clock (µs): what the application computes leases with.
    pub(super) fn app_now(&self) -> u64 {
        self.world().process_clock_us(self.run.idx)
    }

    /// A new record for this request, in progress (a claim) or done (a saved response). Its
    /// lease is on the process's clock; its creation time too, except in a cache, whose TTL
    /// runs on the cache's own clock (`SET … EX` is relative).
    pub(super) fn new_record(&self, done: Option<(u16, &str)>) -> KeyRecord {
        let now = self.app_now();
        let created =
            if self.store_kind() == KeyStore::Cache { self.world().now_us() } else { now };
        let lease_until = self.lease_until();
        KeyRecord {
            fingerprint: self.fingerprint.clone(),
            status: done.map(|d| d.0 as i64),
            response: done.map(|d| d.1.to_string()),
            state: if done.is_some() { RecordState::Done } else { RecordState::InProgress },
            created_us: created,
            lease_until_us: if done.is_none() { lease_until } else { None },
            token: Some(self.run.id),
            intent: self.intent.clone(),
        }
    }

    pub(super) async fn key_insert(
        &self,
        stmt: Stmt,
        rec: KeyRecord,
        claim: bool,
    ) -> Result<bool, Failure> {
        let s = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            return self.on_map(&s, |m| keystore::map_insert(m, &s, rec, claim)).await;
        }
        self.run.sql(stmt, |c| keystore::sql_insert(c, &s, &rec, claim)).await
    }

    /// Insert this request's in-progress claim if no record exists. `true`: claimed.
    pub(super) async fn key_claim(&self) -> Result<bool, Failure> {
        if self.key_policy().claim_conflict == ClaimConflict::Overwrite {
            let (s, rec) = (self.scope(), self.new_record(None));
            if self.store_kind() != KeyStore::Sqlite {
                return self.on_map(&s, |m| keystore::map_insert(m, &s, rec, false)).await;
            }
            return self.run.sql(Stmt::Claim, |c| keystore::sql_replace(c, &s, &rec)).await;
        }
        self.key_insert(Stmt::Claim, self.new_record(None), true).await
    }

    /// Take over an in-progress claim whose lease has expired (compare-and-set on its token).
    pub(super) async fn key_takeover(&self, old: &KeyRecord) -> Result<bool, Failure> {
        let now = self.app_now();
        let t = Takeover {
            me: self.run.id,
            until_us: self.lease_until().unwrap_or(now),
            now_us: now,
            old_token: old.token,
        };
        let s = self.scope();
        if self.store_kind() != KeyStore::Sqlite {
            return self.on_map(&s, |m| keystore::map_takeover(m, &s, t)).await;
        }
        self.run.sql(Stmt::Claim, |c| keystore::sql_takeover(c, &s, t)).await
    }

    /// Complete this request's claim with its outcome. With fencing, only while this request
    /// still owns the claim. Returns the number of records updated.
    pub(super) async fn key_complete(&self, status: u16, body: &str) -> Result<usize, Failure> {
        let fencing = self.key_policy().fencing;
        let (me, s) = (self.run.id, self.scope());
        if self.store_kind() != KeyStore::Sqlite {
            let rec = self.new_record(Some((status, body)));
            return self.on_map(&s, |m| keystore::map_complete(m, &s, rec, fencing, me)).await;
        }
        self.run
            .sql(Stmt::SaveResponse, |c| keystore::sql_complete(c, &s, status, body, fencing, me))
            .await
    }

    /// Delete this request's own in-progress claim (on error, so a retry can run).
    pub(super) async fn key_release(&self) -> Result<usize, Failure> {
        let (me, s) = (self.run.id, self.scope());
        let any = self.run.world.model.on_error.claim == ClaimCleanup::ReleaseKey;
        if self.store_kind() != KeyStore::Sqlite {
            return self
                .on_map(&s, |m| {
                    if any {
                        m.remove(&s).map_or(0, |_| 1)
                    } else {
                        keystore::map_release(m, &s, me)
                    }
                })
                .await;
        }
        if any {
            return self.run.sql(Stmt::ReleaseClaim, |c| keystore::sql_release_any(c, &s)).await;
        }
        self.run.sql(Stmt::ReleaseClaim, |c| keystore::sql_release(c, &s, me)).await
    }
}
