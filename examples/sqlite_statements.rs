//! Calibration: what each statement of the transactional program costs on a real file
//! database, with the article's settings (rollback journal, synchronous = FULL) and the usual
//! production ones (WAL, synchronous = NORMAL). See docs/calibration.md.
//!
//! `cargo run --release --example sqlite_statements [FOLDER]` (default: the temp folder).

use std::time::Instant;

use rusqlite::Connection;

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p) as usize]
}

fn main() {
    let dir =
        std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    for (journal, sync) in [("DELETE", "FULL"), ("WAL", "NORMAL")] {
        let path = dir.join(format!("idemsim-calibrate-{}-{journal}.db", std::process::id()));
        let c = Connection::open(&path).expect("open");
        c.execute_batch(&format!(
            "PRAGMA journal_mode={journal}; PRAGMA synchronous={sync};
             CREATE TABLE rows(id INTEGER PRIMARY KEY, user TEXT, operation TEXT, item TEXT, qty INTEGER);
             CREATE TABLE keys(user TEXT, operation TEXT, key TEXT, fingerprint TEXT, status INTEGER,
                               response TEXT, PRIMARY KEY(user, operation, key));"
        ))
        .expect("schema");
        let names = ["BEGIN IMMEDIATE", "SELECT key", "INSERT row", "INSERT key", "COMMIT"];
        let mut t: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        let mut time = |i: usize, f: &mut dyn FnMut()| {
            let s = Instant::now();
            f();
            t[i].push(s.elapsed().as_secs_f64() * 1e6);
        };
        for n in 0..2000 {
            let key = format!("k{n}");
            time(0, &mut || c.execute_batch("BEGIN IMMEDIATE").expect("begin"));
            time(1, &mut || {
                let _: Option<i64> = c
                    .prepare_cached(
                        "SELECT status FROM keys WHERE user=?1 AND operation=?2 AND key=?3",
                    )
                    .expect("prepare")
                    .query_row(["u1", "order.create", &key], |r| r.get(0))
                    .ok();
            });
            time(2, &mut || {
                c.prepare_cached("INSERT INTO rows(user,operation,item,qty) VALUES ('u1','order.create','test-item',2)")
                    .expect("prepare")
                    .execute([])
                    .expect("insert");
            });
            time(3, &mut || {
                c.prepare_cached("INSERT INTO keys VALUES ('u1','order.create',?1,'f',201,'{}')")
                    .expect("prepare")
                    .execute([&key])
                    .expect("insert");
            });
            time(4, &mut || c.execute_batch("COMMIT").expect("commit"));
        }
        println!("{} journal={journal} synchronous={sync}", dir.display());
        for (i, v) in t.into_iter().enumerate() {
            println!(
                "  {:<16} p50 {:>8.1} us  p90 {:>8.1} us",
                names[i],
                percentile(v.clone(), 0.5),
                percentile(v, 0.9)
            );
        }
        drop(c);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
