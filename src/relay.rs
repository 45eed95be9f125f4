//! The outbox relay: a background task in every server process of a model with an `outbox`
//! step. Every `relay_every_ms` it delivers unsent outbox rows to the effect receiver, one by
//! one, and marks each sent after the receiver acknowledged it. A crash between the send and
//! the mark (random `faults.crash` at its step boundaries, or an injection at
//! `@relay-after-send`) makes the next relay pass deliver the row again: the receiver must
//! deduplicate (by the row: `effects.dedupe = "row"`).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use madsim::time::sleep;
use rusqlite::params;

use crate::server::{Exec, Flow};
use crate::world::World;

pub(crate) async fn relay_main(world: Arc<World>, idx: usize, conn: Rc<crate::store::Pooled>) {
    let every = Duration::from_millis(world.model.relay_every_ms);
    loop {
        sleep(every).await;
        let mut ex =
            Exec::new(world.clone(), idx, conn.clone(), "relay".into(), None, String::new());
        let Ok(batch) = ex
            .sql("relay", |c| {
                c.prepare_cached(
                    "SELECT id, intent, dedupe FROM outbox WHERE sent = 0 ORDER BY id LIMIT 16",
                )?
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .await
        else {
            continue;
        };
        for (id, intent, dedupe) in batch {
            ex.intent = intent;
            ex.label = format!("relay#{id}");
            ex.effect_dedupe_key = dedupe;
            ex.maybe_crash("before send").await;
            if ex.effect().await.is_err() {
                break; // not acknowledged: try again next pass
            }
            match ex.point("relay-after-send").await {
                Ok(Flow::Next) => {}
                _ => break,
            }
            ex.maybe_crash("between send and mark").await;
            if ex
                .sql("relay", |c| {
                    c.prepare_cached("UPDATE outbox SET sent = 1 WHERE id = ?1")?
                        .execute(params![id])
                })
                .await
                .is_ok()
            {
                ex.event(format!("outbox: message {id} marked sent"));
            }
        }
    }
}
