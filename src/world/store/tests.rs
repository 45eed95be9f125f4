//! Tests of the run databases: two connections locking one database, and restoring the
//! empty image (`vfs::restore`) for every connection.

use super::*;

#[test]
fn two_connections_share_one_database_and_lock_it() {
    let (name, keep) = new_database(Journal::Rollback).unwrap();
    let a = open(&name, Journal::Rollback).unwrap();
    let b = open(&name, Journal::Rollback).unwrap();
    a.execute_batch("BEGIN IMMEDIATE").unwrap();
    a.execute("INSERT INTO rows(user, operation, item, qty, intent, created_us, exec) VALUES ('u','o','i',1,'x',0,0)", []).unwrap();
    let e = b.execute_batch("BEGIN IMMEDIATE").unwrap_err();
    assert!(is_busy(&e), "{e}");
    drop(a); // a crash: the open transaction rolls back
    b.execute_batch("BEGIN IMMEDIATE").unwrap();
    b.execute_batch("COMMIT").unwrap();
    assert_eq!(count_rows(&keep).unwrap(), 0);
}

/// Putting the empty database's bytes back empties it for every connection, whose page
/// caches see the new change counter; rowids start at 1 again. Refused under a lock. The
/// bytes are the image's but for the change counter, run after run.
#[test]
fn restoring_the_empty_image_resets_every_connection() {
    let (name, keep) = new_database(Journal::Rollback).unwrap();
    let image = vfs::file_bytes(&name).unwrap();
    assert!(vfs::snapshot(&name));
    let a = open(&name, Journal::Rollback).unwrap();
    let insert = "INSERT INTO rows(user, operation, item, qty, intent, created_us, exec) \
                  VALUES ('u','o','i',1,'x',0,0)";
    let is_image = || {
        let now = vfs::file_bytes(&name).unwrap();
        now.len() == image.len()
            && now[..24] == image[..24]
            && now[28..92] == image[28..92]
            && now[96..] == image[96..]
    };
    for _ in 0..3 {
        a.execute(insert, []).unwrap();
    }
    assert_eq!(count_rows(&keep).unwrap(), 3);
    a.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert!(!vfs::restore(&name), "refused while a connection holds a lock");
    a.execute_batch("COMMIT").unwrap();
    assert!(vfs::restore(&name));
    assert!(is_image());
    assert_eq!(count_rows(&keep).unwrap(), 0);
    assert_eq!(count_rows(&a).unwrap(), 0);
    a.execute(insert, []).unwrap();
    assert_eq!(a.last_insert_rowid(), 1);
    assert_eq!(count_rows(&keep).unwrap(), 1);
    // Enough rows to grow the file past the image, then back again.
    let big = "INSERT INTO rows(user, operation, item, qty, intent, created_us, exec) \
               VALUES ('u','o',hex(zeroblob(1500)),1,'x',0,0)";
    for _ in 0..20 {
        a.execute(big, []).unwrap();
    }
    assert!(vfs::file_bytes(&name).unwrap().len() > image.len());
    assert!(vfs::restore(&name));
    assert!(is_image());
    assert_eq!(count_rows(&a).unwrap(), 0);
    a.execute(insert, []).unwrap();
    assert_eq!(a.last_insert_rowid(), 1);
}
