//! Just enough HTTP/1.1 over blocking loopback sockets for real runs: a client that sends one
//! request per connection (`Connection: close`) and reads one answer, and the server side of
//! the hook and provider endpoints. Every read is bounded in bytes and time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The largest head or body read from a peer (a target's answer, a hook call).
pub const MAX_MESSAGE: usize = 1 << 20;

/// An HTTP message as read off a socket: the first line, the headers and the body.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// `POST /point HTTP/1.1` or `HTTP/1.1 201 Created`.
    pub start: String,
    /// Header names as sent, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes, or up to the end of the stream without one).
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
    /// The peer closed or reset the connection before a whole message arrived.
    Closed,
    /// Nothing complete within the deadline.
    Timeout,
    /// Not HTTP, or too large.
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

/// Read one message before `deadline`.
pub fn read_message(stream: &mut TcpStream, deadline: Instant) -> Result<Message, ReadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 8192];
    let mut head_end = None;
    let mut need: Option<usize> = None;
    loop {
        if let Some(h) = head_end
            && need.is_some_and(|n| buf.len() >= h + n)
        {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(ReadError::Timeout);
        }
        let _ = stream.set_read_timeout(Some((deadline - now).max(Duration::from_micros(100))));
        match stream.read(&mut chunk) {
            Ok(0) if head_end.is_some() && need.is_none() => break,
            Ok(0) => return Err(ReadError::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ReadError::Timeout);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Closed),
        }
        if buf.len() > MAX_MESSAGE {
            return Err(ReadError::Garbage(format!("a message over {MAX_MESSAGE} bytes")));
        }
        if head_end.is_none()
            && let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n")
        {
            head_end = Some(i + 4);
            need = content_length(&buf[..i])?;
        }
    }
    let h = head_end.unwrap_or(buf.len());
    let mut msg = parse_head(&buf[..h])?;
    let end = need.map_or(buf.len(), |n| h + n);
    msg.body = buf[h..end.min(buf.len())].to_vec();
    Ok(msg)
}

fn content_length(head: &[u8]) -> Result<Option<usize>, ReadError> {
    let text = String::from_utf8_lossy(head);
    for line in text.split("\r\n").skip(1) {
        if let Some((k, v)) = line.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            let n: usize = v
                .trim()
                .parse()
                .map_err(|_| ReadError::Garbage(format!("Content-Length `{}`", v.trim())))?;
            if n > MAX_MESSAGE {
                return Err(ReadError::Garbage(format!("a body of {n} bytes")));
            }
            return Ok(Some(n));
        }
        if let Some((k, v)) = line.split_once(':')
            && k.trim().eq_ignore_ascii_case("transfer-encoding")
            && v.trim().eq_ignore_ascii_case("chunked")
        {
            return Err(ReadError::Garbage("a chunked body (send Content-Length)".into()));
        }
    }
    Ok(None)
}

fn parse_head(head: &[u8]) -> Result<Message, ReadError> {
    let text = std::str::from_utf8(head)
        .map_err(|_| ReadError::Garbage("a message head that is not UTF-8".into()))?;
    let mut lines = text.split("\r\n");
    let start = lines.next().unwrap_or_default().to_string();
    if start.is_empty() {
        return Err(ReadError::Garbage("an empty first line".into()));
    }
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (k, v) = line
            .split_once(':')
            .ok_or_else(|| ReadError::Garbage(format!("a header line without `:`: {line:?}")))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(Message { start, headers, body: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn an_answer_is_read_by_its_length_and_a_bad_one_is_named() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            for answer in [json_answer(201, "{\"id\":1}"), b"garbage\r\n\r\n".to_vec()] {
                let (mut s, _) = l.accept().unwrap();
                let _ = read_message(&mut s, Instant::now() + Duration::from_secs(5)).unwrap();
                send(&mut s, &answer);
            }
        });
        let deadline = || Instant::now() + Duration::from_secs(5);
        let mut s = connect(addr, Duration::from_secs(1)).unwrap();
        send(&mut s, &request_bytes("POST", "/x", &[], b"{}"));
        let m = read_message(&mut s, deadline()).unwrap();
        assert_eq!((m.status(), m.body.as_slice()), (Some(201), &b"{\"id\":1}"[..]));
        let mut s = connect(addr, Duration::from_secs(1)).unwrap();
        send(&mut s, &request_bytes("POST", "/x", &[], b"{}"));
        let m = read_message(&mut s, deadline()).unwrap();
        assert_eq!(m.status(), None);
        t.join().unwrap();
    }
}
