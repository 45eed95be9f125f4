//! The CPU that idemsim's real client spends per copy of a request, measured on the machine at
//! hand: the source of the simulated client's `[world]` CPU costs (docs/reality.md, "Cores").
//!
//! It runs the real client's own pattern (src/real/round.rs): a request thread spawns one
//! thread per copy, one after the other; each copy connects over loopback
//! (`real::wire::connect`), sleeps its connect gap, writes its request (`real::wire::send`) and
//! reads the answer. On-CPU time comes from `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` (nanoseconds the
//! thread ran), so waiting for a core does not count; the cost of reading the clock is
//! measured and subtracted. A loopback server in the same process answers every request.
//!
//! ```text
//! cargo run --release --example client_cpu [rounds]   # default 200 rounds of 20 copies
//! ```

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use idemsim::real::wire;

/// This thread's CPU time (ns): `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`.
fn on_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec to the pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

fn serve(listener: TcpListener) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = conn.write_all(&wire::json_answer(201, "{}"));
        });
    }
}

fn quantiles(name: &str, mut v: Vec<u64>) {
    v.sort_unstable();
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1e6;
    println!(
        "{name:<28} p10 {:.4}  p50 {:.4}  p90 {:.4} ms  (n = {})",
        q(0.1),
        q(0.5),
        q(0.9),
        v.len()
    );
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr: SocketAddr = listener.local_addr().unwrap();
    std::thread::spawn(move || serve(listener));
    let probe = {
        let mut d: Vec<u64> =
            (0..1000).map(|_| on_cpu_ns().wrapping_neg().wrapping_add(on_cpu_ns())).collect();
        d.sort_unstable();
        d[d.len() / 2]
    };
    let bytes = wire::request_bytes(
        "POST",
        "/api/orders",
        &[("Content-Type".into(), "application/json".into())],
        b"{\"item\":\"book\",\"qty\":1}",
    );
    let (mut spawn, mut connect, mut write) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let mut copies = Vec::new();
        for _ in 0..20 {
            let bytes = bytes.clone();
            let before = on_cpu_ns();
            copies.push(std::thread::spawn(move || {
                let start = on_cpu_ns();
                let mut c = wire::connect(addr, Duration::from_secs(2)).expect("connect");
                let connected = on_cpu_ns();
                std::thread::sleep(Duration::from_micros(300));
                let woke = on_cpu_ns();
                assert!(wire::send(&mut c, &bytes));
                let sent = on_cpu_ns();
                let _ =
                    wire::read_message(&mut c, std::time::Instant::now() + Duration::from_secs(2));
                (connected - start, sent - woke, start)
            }));
            spawn.push(on_cpu_ns().saturating_sub(before + probe));
        }
        for c in copies {
            let (c_ns, w_ns, _) = c.join().unwrap();
            connect.push(c_ns.saturating_sub(probe));
            write.push(w_ns.saturating_sub(probe));
        }
    }
    println!("clock read: {:.4} ms (subtracted)", probe as f64 / 1e6);
    quantiles("spawn a copy's thread", spawn);
    quantiles("connect", connect);
    quantiles("write (after the gap)", write);
}
