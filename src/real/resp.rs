//! Framing Redis's wire protocol (RESP2 and RESP3, https://redis.io/docs/latest/develop/reference/protocol-spec/):
//! where one command or reply ends, so that a controlled round's proxy can hold each reply on
//! its own. Nothing is decoded beyond lengths; every frame is bounded.

/// The largest frame the proxy takes (a stored response is a few KiB; Redis's own bulk limit
/// is 512 MiB, far beyond anything an idempotency store sends).
pub const MAX_FRAME: usize = 16 << 20;

/// How deep aggregates may nest.
const MAX_DEPTH: usize = 64;

/// A frame at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// Complete: its length in bytes, and whether it is an out-of-band push (RESP3 `>`),
    /// which answers no command.
    Whole {
        /// Its length in bytes.
        len: usize,
        /// A RESP3 push (`>`).
        push: bool,
    },
    /// More bytes are needed.
    Partial,
}

/// Why a buffer holds no frame.
#[derive(Debug, PartialEq, Eq)]
pub struct Garbage(pub String);

/// The frame at the start of `buf`. An inline command (a line without a type byte, `PING\r\n`)
/// is a frame too.
pub fn frame(buf: &[u8]) -> Result<Frame, Garbage> {
    Framer::default().next(buf)
}

/// The longest line a frame's header may have (a type byte and a length, or a simple value).
const MAX_LINE: usize = 64 << 10;

/// A framer that resumes a partial frame where it stopped: a frame that arrives in many reads
/// is parsed once, not once per read (a long array would otherwise cost its length squared).
#[derive(Debug, Default)]
pub struct Framer {
    /// Where the next value of the current frame starts (0: a new frame).
    pos: usize,
    /// The aggregates open at `pos`, outermost first: how many values each still holds.
    open: Vec<usize>,
}

impl Framer {
    /// The frame at the start of `buf`, which holds what the last call was given (when that
    /// was `Partial`) and maybe more; after `Whole` the next call starts a new frame at the
    /// start of the buffer it is given.
    pub fn next(&mut self, buf: &[u8]) -> Result<Frame, Garbage> {
        let r = self.parse(buf);
        if !matches!(r, Ok(Frame::Partial)) {
            *self = Framer::default();
        }
        r
    }

    fn parse(&mut self, buf: &[u8]) -> Result<Frame, Garbage> {
        loop {
            match self.value(buf)? {
                None if buf.len() > MAX_FRAME => {
                    return Err(Garbage(format!("no complete frame within {MAX_FRAME} bytes")));
                }
                None => return Ok(Frame::Partial),
                Some(end) if end > MAX_FRAME => {
                    return Err(Garbage(format!("a frame over {MAX_FRAME} bytes")));
                }
                Some(end) => {
                    self.pos = end;
                    // The value completes the aggregates it closes, innermost first.
                    while let Some(left) = self.open.last_mut() {
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        self.open.pop();
                    }
                    if self.open.is_empty() {
                        return Ok(Frame::Whole { len: end, push: buf.first() == Some(&b'>') });
                    }
                }
            }
        }
    }

    /// The end of the next value that is not an aggregate holding values (None: incomplete);
    /// such aggregates on the way are opened, `pos` past their headers.
    fn value(&mut self, buf: &[u8]) -> Result<Option<usize>, Garbage> {
        loop {
            let at = self.pos;
            if self.open.len() > MAX_DEPTH {
                return Err(Garbage(format!("aggregates nested over {MAX_DEPTH} deep")));
            }
            let Some(&kind) = buf.get(at) else { return Ok(None) };
            let Some((end, text)) = line(buf, at) else {
                if buf.len() - at > MAX_LINE {
                    return Err(Garbage("a line over 64 KiB".into()));
                }
                return Ok(None);
            };
            let head = &text[1.min(text.len())..];
            match kind {
                // Simple string, error, integer, null, double, boolean, big number.
                b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => return Ok(Some(end)),
                // Blob string, blob error, verbatim string: a length, then that many bytes and
                // CRLF.
                b'$' | b'!' | b'=' => return blob(buf, end, head),
                // Array, set, push; map and attribute hold pairs, and an attribute precedes
                // the value it describes.
                b'*' | b'~' | b'>' | b'%' | b'|' => {
                    let n = number(head)?;
                    if n <= 0 {
                        return Ok(Some(end)); // empty, or RESP2's null array
                    }
                    let per = if matches!(kind, b'%' | b'|') { 2 } else { 1 };
                    let items = usize::try_from(n)
                        .ok()
                        .and_then(|n| n.checked_mul(per))
                        .filter(|&n| n <= MAX_FRAME)
                        .ok_or_else(|| Garbage("an aggregate too long".into()))?;
                    self.open.push(items + usize::from(kind == b'|'));
                    self.pos = end;
                }
                // An inline command: plain text up to CRLF.
                k if self.open.is_empty() && k.is_ascii_alphabetic() => return Ok(Some(end)),
                k => return Err(Garbage(format!("unknown type byte {:?}", k as char))),
            }
        }
    }
}

/// The end of a blob whose header line ends at `end` with length `head`, None when its bytes
/// have not all arrived.
fn blob(buf: &[u8], end: usize, head: &[u8]) -> Result<Option<usize>, Garbage> {
    let n = number(head)?;
    if n < 0 {
        return Ok(Some(end)); // RESP2's null bulk string
    }
    let n = usize::try_from(n).map_err(|_| Garbage("a length out of range".into()))?;
    if n > MAX_FRAME {
        return Err(Garbage(format!("a string over {MAX_FRAME} bytes")));
    }
    let stop = end + n + 2;
    if buf.len() < stop {
        return Ok(None);
    }
    if &buf[end + n..stop] != b"\r\n" {
        return Err(Garbage("a string not followed by CRLF".into()));
    }
    Ok(Some(stop))
}

/// The end of the line starting at `at` (the index after its `\r\n`), and the line.
fn line(buf: &[u8], at: usize) -> Option<(usize, &[u8])> {
    let rest = buf.get(at..)?;
    let nl = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((at + nl + 2, &rest[..nl]))
}

fn number(s: &[u8]) -> Result<i64, Garbage> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or_else(|| Garbage(format!("expected a length, got {:?}", String::from_utf8_lossy(s))))
}

/// A command's name (`GET`, `SET`), upper-cased, for the events that name it.
pub fn command_name(frame: &[u8]) -> String {
    let name = if frame.first() == Some(&b'*') {
        // *N\r\n$len\r\nNAME\r\n...
        line(frame, 0)
            .and_then(|(e, _)| line(frame, e))
            .and_then(|(e, _)| line(frame, e))
            .map(|(_, t)| t.to_vec())
    } else {
        line(frame, 0).map(|(_, t)| t.split(|b| *b == b' ').next().unwrap_or(b"").to_vec())
    };
    let name = name.unwrap_or_default();
    let shown: String = name
        .iter()
        .take(32)
        .map(|&b| if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' { b as char } else { '?' })
        .collect();
    if shown.is_empty() { "?".into() } else { shown.to_ascii_uppercase() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(b: &[u8]) -> usize {
        match frame(b) {
            Ok(Frame::Whole { len, .. }) => len,
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(b)),
        }
    }

    #[test]
    fn frames_end_where_the_protocol_says() {
        assert_eq!(whole(b"+OK\r\n:1\r\n"), 5);
        assert_eq!(whole(b"$-1\r\n"), 5);
        assert_eq!(whole(b"$5\r\nhel\r\n\r\n+OK"), 11); // a CRLF inside a bulk string
        let set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
        assert_eq!(whole(set), set.len());
        assert_eq!(command_name(set), "SET");
        assert_eq!(whole(b"%1\r\n+a\r\n:1\r\n"), 12);
        assert_eq!(whole(b"|1\r\n+a\r\n+b\r\n:7\r\n"), 16);
        assert_eq!(whole(b"PING\r\n"), 6);
        assert_eq!(command_name(b"ping now\r\n"), "PING");
        assert_eq!(frame(b">2\r\n+a\r\n+b\r\n"), Ok(Frame::Whole { len: 12, push: true }));
    }

    #[test]
    fn a_partial_frame_waits_and_garbage_is_named() {
        for cut in [&b"$5\r\nhel"[..], b"*3\r\n$3\r\nSET\r\n", b"+O", b""] {
            assert_eq!(frame(cut), Ok(Frame::Partial));
        }
        assert!(frame(b"$x\r\n").is_err());
        assert!(frame(b"$1\r\nab\r\n").is_err());
        assert!(frame(b"\x01\r\n").is_err());
        assert!(frame(format!("${}\r\n", MAX_FRAME + 1).as_bytes()).is_err());
        assert!(frame(b"*99999999999999999999\r\n").is_err());
        let deep = "*1\r\n".repeat(100);
        assert!(frame(deep.as_bytes()).is_err());
        // A header line is short whatever its kind; a blob's length with no end is garbage.
        let long = format!("${}", "9".repeat(70 << 10));
        assert_eq!(frame(long.as_bytes()), Err(Garbage("a line over 64 KiB".into())));
    }

    /// Fed a byte more at a time, the framer resumes where it stopped and ends every frame
    /// where a parse of the whole buffer does, arrays, maps, attributes and blobs included.
    #[test]
    fn a_frame_fed_in_pieces_ends_where_the_whole_does() {
        let frames: [&[u8]; 6] = [
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
            b"%2\r\n+a\r\n*2\r\n:1\r\n:2\r\n+b\r\n$-1\r\n",
            b"|1\r\n+a\r\n+b\r\n*1\r\n$5\r\nhel\r\n\r\n",
            b">2\r\n+a\r\n*0\r\n",
            b"PING\r\n",
            b"*2\r\n*1\r\n*1\r\n+x\r\n_\r\n",
        ];
        for f in frames {
            let whole = frame(f).unwrap();
            let mut framer = Framer::default();
            for cut in 0..f.len() {
                assert_eq!(framer.next(&f[..cut]), Ok(Frame::Partial), "{cut} of {f:?}");
            }
            assert_eq!(framer.next(f), Ok(whole));
            // Reset after a whole frame: the next one starts at the buffer's start.
            assert_eq!(framer.next(b"+OK\r\n"), Ok(Frame::Whole { len: 5, push: false }));
        }
        // A long array in 64 KiB reads: each read resumes where the last stopped.
        let n = 200_000;
        let mut big = format!("*{n}\r\n").into_bytes();
        for _ in 0..n {
            big.extend_from_slice(b":1\r\n");
        }
        let mut framer = Framer::default();
        let mut end = 0;
        let got = loop {
            end = (end + (64 << 10)).min(big.len());
            match framer.next(&big[..end]).unwrap() {
                Frame::Partial => assert!(end < big.len()),
                whole => break whole,
            }
        };
        assert_eq!(got, Frame::Whole { len: big.len(), push: false });
        assert!(framer.open.is_empty() && framer.pos == 0);
    }
}
