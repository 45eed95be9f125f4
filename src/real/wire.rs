//! HTTP/1.1 over blocking loopback sockets for real runs: a client that sends one request per
//! connection (`Connection: close`) and reads one answer, and the server side of the hook and
//! provider endpoints. Heads are parsed by `httparse`; bodies are framed as RFC 9112 §6.3 says
//! (chunked, `Content-Length`, or to the end of the connection); every read is bounded in bytes
//! and time, and every refusal says what was wrong.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The largest head or body read from a peer (a target's answer, a hook call).
pub const MAX_MESSAGE: usize = 1 << 20;

/// The most header lines a message may have.
const MAX_HEADERS: usize = 96;

/// An HTTP message as read off a socket: the first line, the headers and the body.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// `POST /point HTTP/1.1` or `HTTP/1.1 201 Created`.
    pub start: String,
    /// Header names as sent, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Message {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The status of an answer (`HTTP/1.1 201 …` → 201).
    pub fn status(&self) -> Option<u16> {
        let mut parts = self.start.split_whitespace();
        let version = parts.next()?;
        if !version.starts_with("HTTP/1.") {
            return None;
        }
        parts.next()?.parse().ok().filter(|s| (100..=599).contains(s))
    }

    /// The path of a request (`POST /point HTTP/1.1` → `/point`).
    pub fn path(&self) -> Option<&str> {
        self.start.split_whitespace().nth(1)
    }
}

/// Why a message could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The peer closed or reset the connection before any byte of a message arrived.
    Closed,
    /// Nothing arrived before the deadline.
    Timeout,
    /// What arrived is not a whole HTTP/1.1 message: why, in words (the peer's fault).
    Garbage(String),
}

/// Write a request: `Connection: close`, `Content-Length` and the given headers.
pub fn request_bytes(
    method: &str,
    path: &str,
    headers: &[crate::http::Header],
    body: &[u8],
) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

/// Write an answer with a JSON body and `Connection: close`.
pub fn json_answer(status: u16, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Connect to a loopback address within `timeout`.
pub fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    assert!(addr.ip().is_loopback(), "real runs talk to loopback addresses only");
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Send all of `bytes`; false when the peer is gone.
pub fn send(stream: &mut TcpStream, bytes: &[u8]) -> bool {
    stream.write_all(bytes).and_then(|_| stream.flush()).is_ok()
}

/// Read one message before `deadline`: a request, or an answer (interim `1xx` answers are
/// skipped).
pub fn read_message(stream: &mut TcpStream, deadline: Instant) -> Result<Message, ReadError> {
    let started = Instant::now();
    let mut r = Reader { stream, buf: Vec::with_capacity(1024), deadline, read: 0 };
    loop {
        let (mut msg, framing) = r.head()?;
        let late = |what: &str| {
            let ms = (deadline.saturating_duration_since(started).as_micros() + 500) / 1000;
            ReadError::Garbage(format!("no complete reply within {ms} ms ({what})"))
        };
        msg.body = match framing {
            Framing::Interim => continue,
            Framing::Empty => Vec::new(),
            Framing::Length(n) => r.exact(n).map_err(|e| e.or_late(late("its body")))?,
            Framing::Chunked => r.chunked().map_err(|e| e.or_late(late("its chunked body")))?,
            Framing::ToClose => r.until_close().map_err(|e| {
                e.or_late(late(
                    "it has neither Content-Length nor chunked encoding, and the \
                     connection stayed open",
                ))
            })?,
        };
        return Ok(msg);
    }
}

/// How a message's body is delimited (RFC 9112 §6.3).
enum Framing {
    /// A `1xx` answer: another answer follows.
    Interim,
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Up to the end of the connection (an answer with neither).
    ToClose,
}

/// A failure inside a body: the deadline passed after the head had arrived, or a refusal.
enum BodyError {
    Late,
    Bad(ReadError),
}

impl BodyError {
    fn or_late(self, late: ReadError) -> ReadError {
        match self {
            BodyError::Late => late,
            BodyError::Bad(e) => e,
        }
    }
}

fn garbage(why: impl Into<String>) -> ReadError {
    ReadError::Garbage(why.into())
}

struct Reader<'a> {
    stream: &'a mut TcpStream,
    /// Bytes read and not yet consumed.
    buf: Vec<u8>,
    deadline: Instant,
    /// Bytes read in all.
    read: usize,
}

/// What one read gave.
enum Got {
    Bytes,
    End,
    Late,
}

/// Wait until `stream` has bytes (or an end or error) to read, for at most `wait`: false when
/// the time ran out. `ppoll` waits on a high-resolution timer; a socket's `SO_RCVTIMEO` (what
/// `set_read_timeout` sets) counts in scheduler ticks and rounds up, so on a kernel with
/// `HZ = 250` a 3 ms timeout waited 8 ms (measured): a client that abandons its first attempt
/// after 3 ms must abandon it after 3 ms.
fn readable_within(stream: &TcpStream, wait: Duration) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ts = libc::timespec {
        tv_sec: wait.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    // SAFETY: one valid pollfd for the duration of the call, a valid timespec, no signal mask.
    match unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) } {
        0 => Ok(false),
        n if n > 0 => Ok(true),
        _ => Err(std::io::Error::last_os_error()),
    }
}

impl Reader<'_> {
    /// Read more bytes into the buffer.
    fn fill(&mut self) -> Result<Got, ReadError> {
        let mut chunk = [0u8; 8192];
        loop {
            let now = Instant::now();
            if now >= self.deadline {
                return Ok(Got::Late);
            }
            match readable_within(self.stream, self.deadline - now) {
                Ok(true) => {}
                Ok(false) => return Ok(Got::Late),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Ok(Got::End),
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(Got::End),
                Ok(n) => {
                    self.read += n;
                    if self.read > 2 * MAX_MESSAGE {
                        return Err(garbage(format!("a message over {MAX_MESSAGE} bytes")));
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(Got::Bytes);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(Got::Late);
                }
                // A reset: the same as a close to whoever waits for the message.
                Err(_) => return Ok(Got::End),
            }
        }
    }

    /// Read and parse a head; the buffer keeps what follows it.
    fn head(&mut self) -> Result<(Message, Framing), ReadError> {
        loop {
            if let Some(done) = parse_head(&self.buf)? {
                let (msg, framing, len) = done;
                self.buf.drain(..len);
                return Ok((msg, framing));
            }
            if self.buf.len() > MAX_MESSAGE / 8 {
                return Err(garbage(format!("a head over {} bytes", MAX_MESSAGE / 8)));
            }
            match self.fill()? {
                Got::Bytes => {}
                Got::End if self.buf.is_empty() && self.read == 0 => {
                    return Err(ReadError::Closed);
                }
                Got::End => {
                    return Err(garbage(format!(
                        "the connection closed in the middle of a head ({} bytes: {})",
                        self.buf.len(),
                        crate::text::shown(&String::from_utf8_lossy(
                            &self.buf[..self.buf.len().min(60)]
                        ))
                    )));
                }
                Got::Late if self.read == 0 => return Err(ReadError::Timeout),
                Got::Late => {
                    return Err(garbage(format!(
                        "no complete head before the deadline ({} bytes: {})",
                        self.buf.len(),
                        crate::text::shown(&String::from_utf8_lossy(
                            &self.buf[..self.buf.len().min(60)]
                        ))
                    )));
                }
            }
        }
    }

    /// Fill until `n` bytes are buffered.
    fn need(&mut self, n: usize, what: &str) -> Result<(), BodyError> {
        while self.buf.len() < n {
            match self.fill().map_err(BodyError::Bad)? {
                Got::Bytes => {}
                Got::End => {
                    return Err(BodyError::Bad(garbage(format!(
                        "the connection closed {} bytes into {what}",
                        self.buf.len()
                    ))));
                }
                Got::Late => return Err(BodyError::Late),
            }
        }
        Ok(())
    }

    fn exact(&mut self, n: usize) -> Result<Vec<u8>, BodyError> {
        self.need(n, &format!("a {n}-byte body"))?;
        Ok(self.buf.drain(..n).collect())
    }

    fn until_close(&mut self) -> Result<Vec<u8>, BodyError> {
        loop {
            if self.buf.len() > MAX_MESSAGE {
                return Err(BodyError::Bad(garbage(format!("a body over {MAX_MESSAGE} bytes"))));
            }
            match self.fill().map_err(BodyError::Bad)? {
                Got::Bytes => {}
                Got::End => return Ok(std::mem::take(&mut self.buf)),
                Got::Late => return Err(BodyError::Late),
            }
        }
    }

    fn chunked(&mut self) -> Result<Vec<u8>, BodyError> {
        let mut body = Vec::new();
        loop {
            let (start, size) = loop {
                match httparse::parse_chunk_size(&self.buf) {
                    Ok(httparse::Status::Complete(c)) => break c,
                    Ok(httparse::Status::Partial) if self.buf.len() < 4096 => {
                        self.need(self.buf.len() + 1, "a chunk's size line")?;
                    }
                    _ => {
                        return Err(BodyError::Bad(garbage(format!(
                            "a chunk size line that is not hex: {}",
                            crate::text::shown(&String::from_utf8_lossy(
                                &self.buf[..self.buf.len().min(40)]
                            ))
                        ))));
                    }
                }
            };
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            if size > MAX_MESSAGE.saturating_sub(body.len()) {
                return Err(BodyError::Bad(garbage(format!("a body over {MAX_MESSAGE} bytes"))));
            }
            self.buf.drain(..start);
            if size == 0 {
                return self.trailers().map(|()| body);
            }
            self.need(size + 2, "a chunk")?;
            body.extend(self.buf.drain(..size));
            if !self.buf.starts_with(b"\r\n") {
                return Err(BodyError::Bad(garbage("a chunk not followed by CRLF")));
            }
            self.buf.drain(..2);
        }
    }

    /// Skip the trailer section after the last chunk, up to its empty line.
    fn trailers(&mut self) -> Result<(), BodyError> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let empty = i == 0;
                self.buf.drain(..i + 2);
                if empty {
                    return Ok(());
                }
                continue;
            }
            if self.buf.len() > 16 * 1024 {
                return Err(BodyError::Bad(garbage("a trailer section over 16384 bytes")));
            }
            self.need(self.buf.len() + 1, "the trailers after the last chunk")?;
        }
    }
}

/// Parse a head at the start of `buf`: None while it is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<(Message, Framing, usize)>, ReadError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let refused = |e: httparse::Error| {
        garbage(format!(
            "a head that is not HTTP/1.1 ({e}): {}",
            crate::text::shown(&String::from_utf8_lossy(&buf[..buf.len().min(60)]))
        ))
    };
    if buf.starts_with(b"HTTP/") {
        let mut res = httparse::Response::new(&mut slots);
        let len = match res.parse(buf).map_err(refused)? {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => return Ok(None),
        };
        let code = res.code.unwrap_or(0);
        let start =
            format!("HTTP/1.{} {code} {}", res.version.unwrap_or(1), res.reason.unwrap_or(""));
        let headers = owned(res.headers);
        let framing = match code {
            100..=199 => Framing::Interim,
            204 | 304 => Framing::Empty,
            _ => body_framing(&headers, Framing::ToClose)?,
        };
        return Ok(Some((Message { start, headers, body: Vec::new() }, framing, len)));
    }
    let mut req = httparse::Request::new(&mut slots);
    let len = match req.parse(buf).map_err(refused)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return Ok(None),
    };
    let start = format!(
        "{} {} HTTP/1.{}",
        req.method.unwrap_or(""),
        req.path.unwrap_or(""),
        req.version.unwrap_or(1)
    );
    let headers = owned(req.headers);
    let framing = body_framing(&headers, Framing::Empty)?;
    Ok(Some((Message { start, headers, body: Vec::new() }, framing, len)))
}

fn owned(headers: &[httparse::Header]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).trim().to_string()))
        .collect()
}

/// The framing a head declares; `otherwise` when it declares none.
fn body_framing(headers: &[(String, String)], otherwise: Framing) -> Result<Framing, ReadError> {
    fn named<'h>(
        headers: &'h [(String, String)],
        n: &'static str,
    ) -> impl Iterator<Item = &'h (String, String)> {
        headers.iter().filter(move |(k, _)| k.eq_ignore_ascii_case(n))
    }
    if let Some((_, te)) = named(headers, "transfer-encoding").last() {
        // The final coding decides: chunked is read; anything else runs to the close.
        let last = te.rsplit(',').next().unwrap_or("").trim();
        return Ok(if last.eq_ignore_ascii_case("chunked") {
            Framing::Chunked
        } else {
            Framing::ToClose
        });
    }
    let mut length: Option<usize> = None;
    for (_, v) in named(headers, "content-length") {
        for part in v.split(',') {
            let n: usize = part
                .trim()
                .parse()
                .map_err(|_| garbage(format!("Content-Length `{}`", crate::text::printable(v))))?;
            if length.is_some_and(|l| l != n) {
                return Err(garbage(format!(
                    "two different Content-Length values ({} and {n}): RFC 9112 §6.3 calls \
                     that unrecoverable",
                    length.unwrap_or(0)
                )));
            }
            length = Some(n);
        }
    }
    match length {
        Some(n) if n > MAX_MESSAGE => {
            Err(garbage(format!("a body of {n} bytes, over the {MAX_MESSAGE}-byte limit")))
        }
        Some(n) => Ok(Framing::Length(n)),
        None => Ok(otherwise),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Send a request to a peer that answers `raw` (then closes, or holds the connection open
    /// for 2 s), and read its answer within `within_ms`.
    fn answered(raw: &[u8], close: bool, within_ms: u64) -> Result<Message, ReadError> {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let raw = raw.to_vec();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let _ = read_message(&mut s, Instant::now() + Duration::from_secs(5)).unwrap();
            send(&mut s, &raw);
            if !close {
                std::thread::sleep(Duration::from_millis(2000));
            }
        });
        let mut s = connect(addr, Duration::from_secs(1)).unwrap();
        send(&mut s, &request_bytes("POST", "/x", &[], b"{}"));
        let m = read_message(&mut s, Instant::now() + Duration::from_millis(within_ms));
        drop(s);
        t.join().unwrap();
        m
    }

    fn refusal(raw: &'static [u8], close: bool) -> String {
        match answered(raw, close, 300) {
            Err(ReadError::Garbage(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// A deadline a few milliseconds away is kept to the timer's precision, not rounded up to
    /// scheduler ticks: `SO_RCVTIMEO` turned a 3 ms wait into 8 ms on a `HZ = 250` kernel, so
    /// the real client abandoned a "3 ms" attempt after 8 (docs/reality.md). The fastest of
    /// five waits (a loaded machine can only make one slower) ends well before a tick's
    /// rounding would.
    #[test]
    fn a_short_deadline_is_kept_to_the_timer_not_to_ticks() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut s = connect(l.local_addr().unwrap(), Duration::from_secs(1)).unwrap();
        let (_peer, _) = l.accept().unwrap();
        let fastest = (0..5)
            .map(|_| {
                let t = Instant::now();
                let r = read_message(&mut s, t + Duration::from_millis(3));
                assert!(matches!(r, Err(ReadError::Timeout)), "{r:?}");
                t.elapsed()
            })
            .min()
            .unwrap();
        assert!(fastest >= Duration::from_millis(3), "{fastest:?}");
        assert!(fastest < Duration::from_micros(5500), "a 3 ms deadline waited {fastest:?}");
    }

    #[test]
    fn answers_are_framed_as_servers_send_them() {
        let m = answered(&json_answer(201, "{\"id\":1}"), true, 5000).unwrap();
        assert_eq!((m.status(), m.body.as_slice()), (Some(201), &b"{\"id\":1}"[..]));
        // Node's res.writeHead + res.end: chunked, with a chunk extension and a trailer.
        let raw = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n\
                    4;x=1\r\n{\"id\r\n4\r\n\":7}\r\n0\r\nX-T: 1\r\n\r\n";
        let m = answered(raw, false, 5000).unwrap();
        assert_eq!((m.status(), m.body.as_slice()), (Some(201), &b"{\"id\":7}"[..]));
        // Neither length nor chunks: the body runs to the close.
        let m = answered(b"HTTP/1.1 200 OK\r\n\r\n{\"ok\":1}", true, 5000).unwrap();
        assert_eq!(m.body, b"{\"ok\":1}");
        // An interim 100 is skipped; bare LF line endings are read (RFC 9112 §2.2).
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 409 Conflict\nContent-Length: 2\n\n{}";
        let m = answered(raw, false, 5000).unwrap();
        assert_eq!((m.status(), m.body.as_slice()), (Some(409), &b"{}"[..]));
    }

    #[test]
    fn a_reply_that_cannot_be_framed_is_refused_with_its_cause() {
        let why =
            refusal(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", true);
        assert!(why.contains("two different Content-Length values (2 and 3)"), "{why}");
        let why = refusal(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{\"id\":1}", true);
        assert!(why.contains("closed 8 bytes into a 40-byte body"), "{why}");
        let why = refusal(b"HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n", true);
        assert!(why.contains("a body of 104857600 bytes, over the 1048576-byte limit"), "{why}");
        let why = refusal(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n{}", false);
        assert!(
            why.starts_with("no complete reply within 300 ms") && why.contains("stayed open"),
            "{why}"
        );
        let why = refusal(b"garbage\r\n\r\n", true);
        assert!(why.starts_with("a head that is not HTTP/1.1"), "{why}");
        let why = refusal(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", true);
        assert!(why.contains("not hex"), "{why}");
        // Nothing at all is the client's ordinary transport failure, not a refusal.
        assert_eq!(answered(b"", true, 5000).unwrap_err(), ReadError::Closed);
        assert_eq!(answered(b"", false, 200).unwrap_err(), ReadError::Timeout);
    }
}
