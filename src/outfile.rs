//! Output files given on the command line (`--svg`, `--html`, `-o`, `--out`, `calibrate
//! --out`): one set of rules for every option that writes a file ([`destination`]) and a
//! whole-file write ([`write_file`]). Uses only [`crate::input`]'s error.

use std::path::{Path, PathBuf};

use crate::input::InputError;

/// Where an output file given on the command line goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// `-`, or a path naming the file stdout is open on (`/dev/stdout`, `/dev/fd/1`).
    Stdout,
    /// A path naming the file stderr is open on (`/dev/stderr`).
    Stderr,
    /// A regular file to replace whole, or to create: the path given or, when it is a
    /// symbolic link, the file the link resolves to.
    File(PathBuf),
}

/// Where an output path writes, or why it is refused (an error naming the path: exit 2).
/// The rules, shared by every option that writes a file (`--svg`, `--html`, `-o`, `--out`):
///
/// - `-` is stdout; so is any path naming the very file stdout is open on (same device and
///   inode: `/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`, the terminal's own device); a
///   path naming stderr's file is stderr.
/// - A path that does not exist is created.
/// - A regular file is replaced whole (see [`write_file`]).
/// - A symbolic link is followed: the file it resolves to is replaced and the link stays a
///   link. A dangling link (its target does not exist) is refused rather than followed, so
///   that no file is created wherever a stale or planted link points (`echo > link` would
///   create it; here the target must exist, or give its path).
/// - A folder, a FIFO, a device, a socket (anything that exists and is not a regular file,
///   through links too) is refused: replacing it would break what it is, writing into it
///   could block.
pub fn destination(path: &Path) -> Result<Dest, InputError> {
    if path.as_os_str() == "-" {
        return Ok(Dest::Stdout);
    }
    let refuse = |msg: String| Err(InputError::file(path, msg));
    let cannot = |e: std::io::Error| InputError::file(path, format!("cannot write: {e}"));
    let entry = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Dest::File(path.to_path_buf()));
        }
        Err(e) => return Err(cannot(e)),
    };
    let link = entry.file_type().is_symlink();
    let meta = if link {
        match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return refuse(
                    "is a symbolic link to nothing: refused rather than creating a file where it \
                     points (create its target, or give the target's path)"
                        .into(),
                );
            }
            Err(e) => return Err(cannot(e)),
        }
    } else {
        entry
    };
    if let Some(std) = standard_stream(&meta) {
        return Ok(std);
    }
    let t = meta.file_type();
    if t.is_dir() {
        return refuse("is a folder; expected a file to write".into());
    }
    if !t.is_file() {
        return refuse(format!(
            "is {}, not a regular file: refused, as it would be replaced or could block (`-` \
             writes to stdout)",
            kind(&t)
        ));
    }
    if link {
        return Ok(Dest::File(std::fs::canonicalize(path).map_err(cannot)?));
    }
    Ok(Dest::File(path.to_path_buf()))
}

/// What a file that is not a regular file or a folder is, for a refusal.
fn kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Stdout or stderr, when `meta` is the file one of them is open on.
fn standard_stream(meta: &std::fs::Metadata) -> Option<Dest> {
    use std::os::unix::fs::MetadataExt;
    let same = |fd: libc::c_int| {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstat writes a `stat` into the buffer it is given and reads nothing else.
        let ok = unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0;
        // SAFETY: fstat returned 0, so it filled the buffer.
        ok && {
            let st = unsafe { st.assume_init() };
            st.st_dev == meta.dev() && st.st_ino == meta.ino()
        }
    };
    if same(1) {
        Some(Dest::Stdout)
    } else if same(2) {
        Some(Dest::Stderr)
    } else {
        None
    }
}

/// Write a whole output file or nothing, where [`destination`] says (`-`: stdout).
///
/// A file is written as a temporary file in the target's own folder (created exclusively,
/// so never through a link planted under its name), flushed to disk and renamed onto the
/// target: a reader, or a shard killed mid-write on a shared volume, never sees a truncated
/// file, and a link given as the path stays a link to the new file. The replaced file's
/// permission bits are kept; its owner, extended attributes and other hard links are not (a
/// hard link keeps the old contents).
///
/// Limits (Linux): the target is checked when the command starts and again just before the
/// rename, but not atomically with it. `rename` never opens or follows what it replaces, so
/// no race can make a write block on a FIFO or go through a link; at worst a FIFO or link
/// created at the target between the last check and the rename is replaced, and a link
/// retargeted in between still has its old target written.
pub fn write_file(path: &Path, text: &str) -> Result<(), InputError> {
    use std::io::Write as _;
    let err = |e: std::io::Error| InputError::file(path, format!("cannot write: {e}"));
    match destination(path)? {
        Dest::Stdout => {
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes()).and_then(|()| o.flush()).map_err(err)
        }
        Dest::Stderr => {
            let mut o = std::io::stderr().lock();
            o.write_all(text.as_bytes()).and_then(|()| o.flush()).map_err(err)
        }
        Dest::File(target) => replace_file(path, &target, text),
    }
}

/// The temporary file beside `target`, written, then renamed onto it (see [`write_file`]).
fn replace_file(path: &Path, target: &Path, text: &str) -> Result<(), InputError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let err = |e: std::io::Error| InputError::file(path, format!("cannot write: {e}"));
    let old = std::fs::symlink_metadata(target).ok().filter(|m| m.is_file());
    let (mut file, tmp) = loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tmp = target.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}-{n}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        // `create_new` is O_EXCL: it fails on anything already there, a link included.
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp);
        match opened {
            Ok(f) => break (f, tmp),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => continue,
            Err(e) => return Err(err(e)),
        }
    };
    let written = (|| {
        if let Some(m) = &old {
            file.set_permissions(m.permissions())?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()
    })();
    let renamed = written.map_err(err).and_then(|()| {
        // Checked again: what appeared at the target since the start is refused, not replaced.
        match std::fs::symlink_metadata(target) {
            Ok(m) if !m.is_file() => Err(InputError::file(
                path,
                format!("{} changed while writing; nothing written", target.display()),
            )),
            _ => std::fs::rename(&tmp, target).map_err(err),
        }
    });
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}
