//! A controlled round's proxy between a server and a dependency it talks to (a target's
//! `[[service]]` with `proxy = "resp"`: a Redis). The server is given the proxy's port instead
//! of the service's; every command goes straight on, and every reply to a command a flow sent
//! waits in the conductor (`resume A at redis GET`) until it is released: the order in which a
//! process's dependency replies arrive becomes the conductor's choice, as a hook point's is.
//!
//! Replies on one connection keep their order (a client pairs them with its commands by
//! position): a reply is enabled only when every held reply before it on its connection has
//! gone. A command is the flow's that the conductor released last and that is still moving;
//! one sent when no flow moves (a connection's handshake, a warm-up, work after an answer)
//! passes, as does a push. Every read is bounded ([`resp::MAX_FRAME`]); a connection that
//! stops speaking RESP is cut and named.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::conduct::Conductor;
use super::resp::{self, Frame};

/// One running proxy.
pub struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    name: String,
    upstream: SocketAddr,
    conductor: Arc<Conductor>,
    /// Every connection's two sockets (the server's, the upstream), to cut them.
    sockets: Mutex<std::collections::BTreeMap<u64, [TcpStream; 2]>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// What went wrong on a connection (the round is refused with it).
    faults: Mutex<Vec<String>>,
}

impl Proxy {
    /// Listen on a free loopback port for service `name`, whose real port is `upstream`.
    pub fn start(name: &str, upstream: u16, conductor: Arc<Conductor>) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            name: name.to_string(),
            upstream: SocketAddr::from(([127, 0, 0, 1], upstream)),
            conductor,
            sockets: Mutex::default(),
            threads: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
        });
        let (sh, sp) = (shared.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut n = 0u64;
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(conn) = conn {
                    sh.open(n, conn);
                    n += 1;
                }
            }
        });
        Ok(Proxy { port, stop, shared, thread: Some(thread) })
    }

    /// The port the server is given.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cut every connection, stop listening; what went wrong, if anything. Call after the
    /// conductor finished (a held reply's writer returns then).
    pub fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_millis(200),
        );
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for s in self.shared.sockets.lock().unwrap_or_else(|e| e.into_inner()).values().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *self.shared.threads.lock().unwrap());
        for t in threads {
            let _ = t.join();
        }
        std::mem::take(&mut *self.shared.faults.lock().unwrap())
    }
}

/// The services' ports as the servers are given them: in a controlled round, a proxied
/// service's is its proxy's ([`super::proxy`]), started here into `proxies`.
pub fn proxied_ports(
    target: &super::target::Target,
    ports: Vec<(String, u16)>,
    conductor: Option<&Arc<Conductor>>,
    proxies: &mut Vec<Proxy>,
) -> Result<Vec<(String, u16)>, String> {
    let Some(c) = conductor else { return Ok(ports) };
    let mut out = Vec::new();
    for (name, port) in ports {
        let proxied = target.services.iter().any(|s| s.name == name && s.proxy.is_some());
        if !proxied {
            out.push((name, port));
            continue;
        }
        let p = Proxy::start(&name, port, c.clone())
            .map_err(|e| format!("cannot listen on loopback for service `{name}`'s proxy: {e}"))?;
        out.push((name, p.port()));
        proxies.push(p);
    }
    Ok(out)
}

/// A reply on its way to the server: its bytes, and the conductor's ticket when it is held.
type Outgoing = (Vec<u8>, Option<u64>);

/// Each command's flow (None: its reply passes) and name, in the order sent.
type Owners = Mutex<VecDeque<(Option<String>, String)>>;

/// What [`frames`] hands every whole frame to (and whether it is a push).
type OnFrame<'a> = dyn FnMut(&[u8], bool) -> Result<(), String> + 'a;

impl Shared {
    /// Connection `n` from the server: open its upstream and start its three pumps.
    fn open(self: &Arc<Self>, n: u64, client: TcpStream) {
        let up = match TcpStream::connect_timeout(&self.upstream, Duration::from_secs(2)) {
            Ok(up) => up,
            Err(e) => {
                self.fault(format!("connection {n}: cannot reach {}: {e}", self.upstream));
                return;
            }
        };
        let _ = (client.set_nodelay(true), up.set_nodelay(true));
        let clones = (client.try_clone(), up.try_clone(), client.try_clone(), up.try_clone());
        let (Ok(c_read), Ok(u_write), Ok(c_write), Ok(u_read)) = clones else {
            self.fault(format!("connection {n}: cannot share its sockets"));
            return;
        };
        self.sockets.lock().unwrap().insert(n, [client, up]);
        let owners: Arc<Owners> = Arc::default();
        let (tx, rx) = mpsc::channel::<Outgoing>();
        let mut threads = Vec::new();
        let (me, o) = (self.clone(), owners.clone());
        threads.push(std::thread::spawn(move || me.commands(n, c_read, u_write, &o)));
        let me = self.clone();
        threads.push(std::thread::spawn(move || me.replies(n, u_read, &owners, &tx)));
        let me = self.clone();
        threads.push(std::thread::spawn(move || me.deliver(rx, c_write)));
        self.threads.lock().unwrap().extend(threads);
    }

    /// Cut connection `n` (its server's socket and its upstream): the server sees it close
    /// at once instead of waiting for replies that cannot come.
    fn cut(&self, n: u64) {
        let sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        for s in sockets.get(&n).into_iter().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn fault(&self, why: String) {
        self.faults.lock().unwrap().push(format!("proxy `{}`: {why}", self.name));
    }

    /// Server → dependency: note each command's flow, then pass it on.
    fn commands(&self, n: u64, from: TcpStream, mut to: TcpStream, owners: &Owners) {
        let res = frames(from, &mut |frame, push| {
            if !push {
                let who = self.conductor.command_owner();
                owners.lock().unwrap().push_back((who, resp::command_name(frame)));
            }
            to.write_all(frame).map_err(|e| e.to_string())
        });
        if let Err(why) = res {
            self.fault(format!("connection {n}, a command: {why}"));
            self.cut(n);
        }
        let _ = to.shutdown(Shutdown::Write);
    }

    /// Dependency → server: each reply to a flow's command waits in the conductor.
    fn replies(&self, n: u64, from: TcpStream, owners: &Owners, tx: &mpsc::Sender<Outgoing>) {
        let res = frames(from, &mut |frame, push| {
            let (who, cmd) = if push {
                (None, String::new())
            } else {
                owners.lock().unwrap().pop_front().unwrap_or((None, String::new()))
            };
            let point = format!("{} {cmd}", self.name);
            let ticket = who.and_then(|f| self.conductor.dependency_reply(&f, n, &point));
            // The writer ended (the server closed, or was ended with the round): so does this.
            tx.send((frame.to_vec(), ticket)).map_err(|_| String::new())
        });
        match res {
            Err(why) if !why.is_empty() => {
                self.fault(format!("connection {n}, a reply: {why}"));
                self.cut(n);
            }
            _ => {}
        }
    }

    /// Replies to the server, in order, each held one after its release.
    fn deliver(&self, rx: mpsc::Receiver<Outgoing>, mut to: TcpStream) {
        for (bytes, ticket) in rx {
            if let Some(t) = ticket {
                self.conductor.await_release(t);
            }
            if to.write_all(&bytes).is_err() {
                return;
            }
        }
    }
}

/// Read `from` until it closes and hand every whole frame (and whether it is a push) to
/// `each`, in order. An error: the stream stopped speaking RESP, or `each` failed.
fn frames(mut from: TcpStream, each: &mut OnFrame<'_>) -> Result<(), String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut framer = resp::Framer::default();
    loop {
        let got = match from.read(&mut chunk) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(k) => k,
        };
        buf.extend_from_slice(&chunk[..got]);
        let mut used = 0;
        loop {
            match framer.next(&buf[used..]) {
                Ok(Frame::Whole { len, push }) => {
                    each(&buf[used..used + len], push)?;
                    used += len;
                }
                Ok(Frame::Partial) => break,
                Err(g) => return Err(format!("not RESP ({})", g.0)),
            }
        }
        buf.drain(..used);
    }
}
