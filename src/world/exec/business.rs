//! The business steps of an execution: the row, its business key and what a clash answers,
//! stock, versioned documents, status events, the rate limit, the outbox, and the sim's named
//! points.

use super::{Exec, Flow};
use crate::history::{Stmt, What};
use crate::http::{self, Order, Reason, Response};
use crate::model::{EffectDedupe, OnClash, VersionCheck};
use crate::world::runner::Failure;
use crate::world::store;

impl Exec {
    /// `insert-row`: the business row (or the business key's clash, answered as the model says).
    pub(super) async fn insert_row(&mut self) -> Result<Flow, Failure> {
        let o = self.order.clone().expect("admitted");
        let intent = self.intent.clone();
        let (now, exec) = (self.world().now_us(), self.run.id);
        let rows = self.world().model.rows.clone();
        let key = self.key.as_ref().map(|s| s.key.as_str());
        let natural =
            rows.as_ref().and_then(|r| r.natural(&o.principal(), o.operation, &o.item, key));
        let constraint = rows.as_ref().is_none_or(|r| r.constraint);
        let id = self.world().next_row_id();
        let new = store::NewRow { id, intent: &intent, now_us: now, exec };
        let done = self
            .run
            .sql(Stmt::InsertRow, |c| {
                store::insert_row(c, &o, &new, natural.as_deref(), constraint)
            })
            .await?;
        match done {
            store::RowInsert::Inserted(id) => {
                self.event(What::RowInserted { row: id });
                self.row_id = Some(id);
                self.response = Some(Response::new(201, o.created_body(id)));
            }
            store::RowInsert::Clash(id, _, _, false)
                if rows.as_ref().is_some_and(|r| r.on_clash == OnClash::Unprocessed) =>
            {
                self.event(What::RowTaken { row: id });
                self.row_id = Some(id);
                self.response = Some(Response::new(201, o.created_body(id)));
            }
            store::RowInsert::Clash(id, item, qty, _) => {
                self.event(What::RowClash { row: id });
                self.business_clash(id, &item, qty);
            }
        }
        Ok(Flow::Next)
    }

    /// `rate-limit`: a token bucket per process; a request over it fails with 429.
    pub(super) async fn rate_limit(&mut self) -> Result<Flow, Failure> {
        let Some((rate, burst)) = self.world().model.rate_limit else {
            return Ok(Flow::Next);
        };
        let now = self.world().now_us();
        let took = {
            let mut st = self.world().lock();
            let p = &mut st.processes[self.run.idx];
            // Micro-tokens: `rate` per second is `rate` micro-tokens per µs.
            let cap = burst * 1_000_000;
            let (left, at) = p.bucket.unwrap_or((cap, now));
            let left = cap.min(left.saturating_add(now.saturating_sub(at).saturating_mul(rate)));
            let took = left >= 1_000_000;
            p.bucket = Some((if took { left - 1_000_000 } else { left }, now));
            took
        };
        self.event(What::RateLimited { allowed: took });
        if took { Ok(Flow::Next) } else { Err(Failure::RateLimited) }
    }

    /// `mark-processed`: the inbox row's event is handled.
    pub(super) async fn mark_processed(&mut self) -> Result<Flow, Failure> {
        let (Some(row), now) = (self.row_id, self.world().now_us()) else {
            return Ok(Flow::Next);
        };
        self.run.sql(Stmt::MarkProcessed, |c| store::mark_processed(c, row, now)).await?;
        self.event(What::RowProcessed { row });
        Ok(Flow::Next)
    }

    /// `check-row`: a row already holding the business key is a business refusal.
    pub(super) async fn check_row(&mut self) -> Result<Flow, Failure> {
        let o = self.order.clone().expect("admitted");
        let key = self.key.as_ref().map(|s| s.key.as_str());
        let rows = self.world().model.rows.clone();
        let Some(natural) =
            rows.as_ref().and_then(|r| r.natural(&o.principal(), o.operation, &o.item, key))
        else {
            return Ok(Flow::Next);
        };
        match self.run.sql(Stmt::CheckRow, |c| store::find_row(c, &natural)).await? {
            None => self.event(What::RowAbsent),
            Some((id, item, qty)) => {
                self.event(What::RowFound { row: id });
                self.business_clash(id, &item, qty);
            }
        }
        Ok(Flow::Next)
    }

    /// `apply-status`: the resource's status, forward only with `events_monotonic`.
    pub(super) async fn apply_status(&mut self) -> Result<Flow, Failure> {
        let o = self.order.clone().expect("admitted");
        let (intent, monotonic) = (self.intent.clone(), self.world().model.events_monotonic);
        let applied = self
            .run
            .sql(Stmt::ApplyStatus, |c| store::apply_status(c, &o.item, o.qty, &intent, monotonic))
            .await?;
        let status = http::status_name(o.qty);
        self.event(What::StatusApplied { resource: o.item.clone(), status, applied });
        self.response = Some(Response::new(200, o.event_body()));
        Ok(Flow::Next)
    }

    /// `update-doc`: a versioned document update (or delete), checked as the model says.
    pub(super) async fn update_doc(&mut self) -> Result<Flow, Failure> {
        let o = self.order.clone().expect("admitted");
        let check = self.world().model.version_check;
        let stamp = match (check, o.client_time) {
            (VersionCheck::ClientTime, None) if o.operation == "doc.update" => {
                self.refuse_update(&o, 428, None);
                return Ok(Flow::Next);
            }
            (VersionCheck::ClientTime, t) => t,
            _ => None,
        };
        let condition = match (check, o.if_match) {
            (VersionCheck::None | VersionCheck::ClientTime, _) | (VersionCheck::IfMatch, None) => {
                None
            }
            (_, Some(v)) => Some(v),
            (VersionCheck::Required, None) => {
                self.refuse_update(&o, 428, None);
                return Ok(Flow::Next);
            }
        };
        let intent = self.intent.clone();
        let delete = o.operation == "doc.delete";
        let w = self
            .run
            .sql(Stmt::UpdateDoc, |c| match (delete, stamp) {
                (true, _) => store::delete_doc(c, &o.item, &intent, condition),
                (false, Some(t)) => store::update_doc_stamped(c, &o.item, o.qty, &intent, t),
                (false, None) => store::update_doc(c, &o.item, o.qty, &intent, condition),
            })
            .await?;
        match w {
            store::DocWrite::Updated(version) if delete => {
                self.event(What::DocDeleted { doc: o.item.clone(), version });
                self.response = Some(Response::new(204, ""));
            }
            store::DocWrite::Missing if delete && self.world().model.delete_missing_ok => {
                self.event(What::DocDeleted { doc: o.item.clone(), version: 0 });
                self.response = Some(Response::new(204, ""));
            }
            store::DocWrite::Updated(version) => {
                let (doc, value) = (o.item.clone(), o.qty);
                self.event(What::DocUpdated { doc, version, value });
                self.response = Some(o.updated(version));
            }
            // A stamp not newer than the stored one: ignored, and still 200.
            store::DocWrite::Stale(current) if stamp.is_some() => {
                let (doc, stamp) = (o.item.clone(), stamp.unwrap_or_default());
                self.event(What::DocIgnored { doc, stamp, current });
                self.response = Some(o.updated(current));
            }
            store::DocWrite::Stale(current) => self.refuse_update(&o, 412, Some(current)),
            store::DocWrite::Missing => self.refuse_update(&o, 404, None),
        }
        Ok(Flow::Next)
    }

    /// `take-stock`: units taken, or sold out (a business refusal).
    pub(super) async fn take_stock(&mut self) -> Result<Flow, Failure> {
        let o = self.order.clone().expect("admitted");
        let took = self.run.sql(Stmt::TakeStock, |c| store::take_stock(c, &o.item, o.qty)).await?;
        if took {
            self.event(What::StockTaken { item: o.item.clone(), units: o.qty });
        } else {
            // A business refusal: nothing more is created; the rest of the program
            // stores the answer under the key and commits.
            self.event(What::SoldOut { item: o.item.clone() });
            self.clashed = true;
            self.response = Some(Response::error(422, "sold out"));
        }
        Ok(Flow::Next)
    }

    /// `outbox`: the effect queued in the request's transaction, for the relay.
    pub(super) async fn outbox(&mut self) -> Result<Flow, Failure> {
        let (intent, dedupe, now) = (self.intent.clone(), self.effect_key(), self.world().now_us());
        let id = self
            .run
            .sql(Stmt::Outbox, |c| store::insert_outbox(c, &intent, dedupe.as_deref(), now))
            .await?;
        self.event(What::OutboxQueued { message: id });
        Ok(Flow::Next)
    }

    /// `@<point>`: the sim's injections for this point.
    pub(super) async fn named_point(&mut self, p: &str) -> Result<Flow, Failure> {
        if self.run.point(p, &self.intent, !self.clashed, || self.effect_key()).await? {
            self.drop_reply = true;
        }
        Ok(Flow::Next)
    }

    /// The business key is taken by row `id`: the `[rows] on_clash` answer becomes the pending
    /// reply (`save-response` stores it under the key like a 201) and nothing more is created.
    pub(super) fn business_clash(&mut self, id: i64, item: &str, qty: i64) {
        self.clashed = true;
        let on_clash = self.world().model.rows.as_ref().map_or(OnClash::Conflict, |r| r.on_clash);
        self.response = Some(match on_clash {
            OnClash::Conflict => Response::taken(),
            OnClash::Acknowledge => Response::new(200, r#"{"status":"already exists"}"#),
            OnClash::Unprocessed => Response::new(200, r#"{"status":"already processed"}"#),
            OnClash::Existing => {
                Response::new(200, format!("{{\"id\":{id},\"item\":\"{item}\",\"qty\":{qty}}}"))
            }
        });
    }

    /// A document update refused (412 stale, 428 no `If-Match`, 404 no document): a business
    /// refusal; nothing more is written, the rest of the program stores the answer.
    pub(super) fn refuse_update(&mut self, o: &Order, status: u16, current: Option<i64>) {
        let (doc, if_match) = (o.item.clone(), o.if_match);
        self.event(What::DocRefused { doc, status, if_match, current });
        self.clashed = true;
        let resp = match status {
            412 => Response::error(412, "version mismatch").meaning(Reason::Precondition),
            428 => Response::error(428, "If-Match required").meaning(Reason::Precondition),
            _ => Response::error(status, "not found"),
        };
        self.response = Some(resp);
    }

    /// The key the effect receiver deduplicates this request's effect by (model's choice).
    pub(super) fn effect_key(&self) -> Option<String> {
        match self.run.world.model.effect_dedupe {
            EffectDedupe::None => None,
            EffectDedupe::Key => {
                self.key.as_ref().map(|s| format!("key:{}/{}/{}", s.user, s.operation, s.key))
            }
            EffectDedupe::Payload => self.order.as_ref().map(|o| {
                let input = format!("{}|{}|{}", o.user, o.operation, o.canonical());
                format!("payload:{}", http::sha256_hex(input.as_bytes()))
            }),
            EffectDedupe::Row => self.row_id.map(|id| format!("row:{id}")),
        }
    }
}
