//! `idemsim`, an in-memory SQLite VFS with the locking of SQLite's own unix VFS.
//!
//! Real SQLite (the bundled library) runs every statement; this VFS only decides where the
//! bytes live (in memory, per worker thread) and how connections lock. Its locks are a port of
//! the in-process part of `unixLock`/`posixUnlock`/`unixCheckReservedLock` (the file lock
//! levels NONE < SHARED < RESERVED < PENDING < EXCLUSIVE, shared between the connections of
//! one process through the inode) and of `unixShmLock`/`unixShmMap` (the WAL index and its
//! eight lock slots). So a rollback-journal database lets readers in while a writer holds
//! RESERVED and blocks new readers from PENDING on, and a WAL database gives readers
//! snapshots, `SQLITE_BUSY_SNAPSHOT` and checkpoints: exactly what a file on disk gives
//! connections of one process, without a system call. SQLite's `memdb` VFS cannot do either
//! (its readers wait behind any writer; it has no shared memory, so no WAL).
//! `tests::differential_*` run random schedules on this VFS and on real files and compare.

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard, Once};

use rusqlite::ffi;

/// The name the VFS is registered under.
pub const NAME: &str = "idemsim";
const NAME_C: &CStr = c"idemsim";

const NONE: c_int = ffi::SQLITE_LOCK_NONE;
const SHARED: c_int = ffi::SQLITE_LOCK_SHARED;
const RESERVED: c_int = ffi::SQLITE_LOCK_RESERVED;
const PENDING: c_int = ffi::SQLITE_LOCK_PENDING;
const EXCLUSIVE: c_int = ffi::SQLITE_LOCK_EXCLUSIVE;
const SHM_SLOTS: usize = ffi::SQLITE_SHM_NLOCK as usize;

/// The WAL index ("-shm" file) of a database: its regions and lock slots.
#[derive(Default)]
struct Shm {
    /// Regions never move once allocated: SQLite keeps pointers into them.
    regions: Vec<Box<[u8]>>,
    /// Per slot: the number of shared holders, or -1 for one exclusive holder.
    locks: [i32; SHM_SLOTS],
    /// Connections that have mapped it.
    users: usize,
}

/// One file: its bytes and, for a database file, its lock state (the unix VFS's inode).
#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    /// The strongest lock any connection holds.
    level: c_int,
    /// Connections holding SHARED or more.
    shared: c_int,
    shm: Option<Shm>,
    /// The bytes [`snapshot`] kept, for [`restore`].
    image: Option<Vec<u8>>,
    /// Chunks of [`CHUNK`] bytes written since the data last equalled the image (one bit
    /// each): every other chunk still holds the image's bytes, up to the file's length.
    dirty: Vec<u64>,
}

/// The granularity of [`Inode::dirty`].
const CHUNK: usize = 4096;

impl Inode {
    /// Note that bytes `from..to` may differ from the image now.
    fn touch(&mut self, from: usize, to: usize) {
        if self.image.is_none() || from >= to {
            return;
        }
        for c in from / CHUNK..=(to - 1) / CHUNK {
            let (w, b) = (c / 64, c % 64);
            if w >= self.dirty.len() {
                self.dirty.resize(w + 1, 0);
            }
            self.dirty[w] |= 1 << b;
        }
    }
}

type Shared = Arc<Mutex<Inode>>;

fn lock(i: &Shared) -> MutexGuard<'_, Inode> {
    i.lock().unwrap_or_else(|p| p.into_inner())
}

/// Named files of every database of this process (names are unique per worker thread).
fn registry() -> MutexGuard<'static, BTreeMap<String, Shared>> {
    static FILES: Mutex<BTreeMap<String, Shared>> = Mutex::new(BTreeMap::new());
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

/// What SQLite's `sqlite3_file` points to for one open file.
struct Handle {
    inode: Shared,
    name: Option<String>,
    delete_on_close: bool,
    /// This connection's lock level on the file.
    level: c_int,
    /// This connection's WAL-index locks (bit per slot).
    shm_shared: u16,
    shm_excl: u16,
    shm_mapped: bool,
}

#[repr(C)]
struct File {
    base: ffi::sqlite3_file,
    handle: *mut Handle,
}

/// # Safety
/// `f` is a `File` this VFS opened (SQLite passes back what `x_open` filled in).
unsafe fn handle<'a>(f: *mut ffi::sqlite3_file) -> &'a mut Handle {
    unsafe { &mut *(*(f as *mut File)).handle }
}

/// The bytes of file `name`, if it exists.
pub fn file_bytes(name: &str) -> Option<Vec<u8>> {
    registry().get(name).map(|i| lock(i).data.clone())
}

/// Keep the current bytes of file `name` as its image, for [`restore`]. False if there is no
/// such file.
pub fn snapshot(name: &str) -> bool {
    let files = registry();
    let Some(inode) = files.get(name) else { return false };
    let mut i = lock(inode);
    i.image = Some(i.data.clone());
    i.dirty.clear();
    true
}

/// Put the image [`snapshot`] kept back as the content of database `name`, with a new file
/// change counter (header bytes 24..28, and 92..96 that vouches for the header's page count):
/// every connection compares those bytes when it next takes a SHARED lock and drops its page
/// cache, as after another process's write. Only the chunks written since are copied back.
/// Refused (false) while any connection holds a lock or its journal is not empty, for a WAL
/// database, or without an image.
pub fn restore(name: &str) -> bool {
    let files = registry();
    let journal_empty =
        files.get(&format!("{name}-journal")).is_none_or(|j| lock(j).data.is_empty());
    let Some(inode) = files.get(name) else { return false };
    let mut guard = lock(inode);
    let i = &mut *guard;
    let Some(image) = i.image.as_deref() else { return false };
    if !journal_empty || i.level != NONE || i.shared != 0 || i.shm.is_some() || image.len() < 100 {
        return false;
    }
    let counter = i.data.get(24..28).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let next = counter.wrapping_add(1).to_be_bytes();
    // Up to the shorter length, only written chunks differ from the image; past it, the
    // image's tail (or nothing).
    let n = image.len();
    i.data.truncate(n);
    let kept = i.data.len();
    for (w, bits) in i.dirty.iter().enumerate() {
        let mut bits = *bits;
        while bits != 0 {
            let c = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let (from, to) = (c * CHUNK, ((c + 1) * CHUNK).min(kept));
            if from < to {
                i.data[from..to].copy_from_slice(&image[from..to]);
            }
        }
    }
    i.data.extend_from_slice(&image[kept..]);
    i.dirty.clear();
    i.data[24..28].copy_from_slice(&next);
    i.data[92..96].copy_from_slice(&next);
    i.touch(24, 96);
    true
}

/// Register the VFS (once per process).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| unsafe {
        let default = ffi::sqlite3_vfs_find(ptr::null());
        let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
            iVersion: 2,
            szOsFile: std::mem::size_of::<File>() as c_int,
            mxPathname: 512,
            pNext: ptr::null_mut(),
            zName: NAME_C.as_ptr(),
            pAppData: default as *mut c_void,
            xOpen: Some(x_open),
            xDelete: Some(x_delete),
            xAccess: Some(x_access),
            xFullPathname: Some(x_full_pathname),
            xDlOpen: None,
            xDlError: None,
            xDlSym: None,
            xDlClose: None,
            xRandomness: Some(x_randomness),
            xSleep: Some(x_sleep),
            xCurrentTime: Some(x_current_time),
            xGetLastError: Some(x_get_last_error),
            xCurrentTimeInt64: Some(x_current_time_int64),
            xSetSystemCall: None,
            xGetSystemCall: None,
            xNextSystemCall: None,
        }));
        ffi::sqlite3_vfs_register(vfs, 0);
    });
}

static IO_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 2,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

unsafe fn name_of(z: *const c_char) -> Option<String> {
    unsafe { name_ref(z) }.map(|n| n.into_owned())
}

/// The name without a copy (SQLite asks whether the journal exists at every read
/// transaction).
unsafe fn name_ref<'a>(z: *const c_char) -> Option<std::borrow::Cow<'a, str>> {
    if z.is_null() {
        return None;
    }
    let c = unsafe { CStr::from_ptr(z) };
    Some(c.to_str().map_or_else(|_| c.to_string_lossy(), std::borrow::Cow::Borrowed))
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    z_name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let name = unsafe { name_of(z_name) };
    let inode = match &name {
        None => Shared::default(),
        Some(n) => {
            let mut files = registry();
            match files.get(n) {
                Some(i) => i.clone(),
                None if flags & ffi::SQLITE_OPEN_CREATE != 0 => {
                    let fresh = Inode { data: spare(), ..Inode::default() };
                    files.entry(n.clone()).or_insert(Arc::new(Mutex::new(fresh))).clone()
                }
                None => {
                    unsafe { (*file).pMethods = ptr::null() };
                    return ffi::SQLITE_CANTOPEN;
                }
            }
        }
    };
    let h = Box::new(Handle {
        inode,
        name,
        delete_on_close: flags & ffi::SQLITE_OPEN_DELETEONCLOSE != 0,
        level: NONE,
        shm_shared: 0,
        shm_excl: 0,
        shm_mapped: false,
    });
    unsafe {
        let f = file as *mut File;
        (*f).handle = Box::into_raw(h);
        (*f).base.pMethods = &IO_METHODS;
        if !out_flags.is_null() {
            *out_flags = flags;
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    z_name: *const c_char,
    _sync_dir: c_int,
) -> c_int {
    if let Some(n) = unsafe { name_ref(z_name) } {
        let gone = registry().remove(n.as_ref());
        recycle(gone);
    }
    ffi::SQLITE_OK
}

thread_local! {
    /// The buffer of the file this thread deleted last, emptied, for the next file it creates:
    /// in rollback mode every write transaction creates its journal and deletes it at COMMIT,
    /// and a run would otherwise allocate (and write into) a fresh [`GROW`]-byte buffer each
    /// time. What a file holds is its length, so a recycled buffer is an empty file.
    static SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The largest buffer [`SPARE`] keeps (bytes): a bigger journal's is freed, so what a thread
/// holds between runs stays bounded whatever a sim writes.
const SPARE_MAX: usize = 1 << 20;

/// Keep the buffer of a deleted file no connection has open, emptied, in [`SPARE`].
fn recycle(gone: Option<Shared>) {
    let Some(inode) = gone.and_then(|i| Arc::try_unwrap(i).ok()) else { return };
    let mut data = inode.into_inner().unwrap_or_else(|p| p.into_inner()).data;
    if data.capacity() > SPARE_MAX {
        return;
    }
    data.clear();
    // `try_with`: a connection closed by a thread-local destructor at exit (a pool's) may
    // delete its files after this thread's SPARE is gone; the buffer is then just freed.
    let _ = SPARE.try_with(|s| {
        let kept = s.take();
        s.set(if data.capacity() > kept.capacity() { data } else { kept });
    });
}

/// The buffer for a file being created: [`SPARE`]'s, or a new one.
fn spare() -> Vec<u8> {
    SPARE.try_with(|s| s.take()).unwrap_or_default()
}

unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    z_name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    let exists = unsafe { name_ref(z_name) }.and_then(|n| registry().get(n.as_ref()).cloned());
    let answer = match exists {
        None => false,
        // As unixAccess: EXISTS means a file with content (an empty journal is not hot).
        Some(i) if flags == ffi::SQLITE_ACCESS_EXISTS => !lock(&i).data.is_empty(),
        Some(_) => true,
    };
    unsafe { *out = answer as c_int };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    z_name: *const c_char,
    n_out: c_int,
    z_out: *mut c_char,
) -> c_int {
    let bytes = unsafe { CStr::from_ptr(z_name) }.to_bytes_with_nul();
    if bytes.len() > n_out as usize {
        return ffi::SQLITE_CANTOPEN;
    }
    unsafe { ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, z_out, bytes.len()) };
    ffi::SQLITE_OK
}

/// The process's default VFS, for the calls that have nothing to do with files.
unsafe fn default_vfs(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    unsafe { (*vfs).pAppData as *mut ffi::sqlite3_vfs }
}

unsafe extern "C" fn x_randomness(vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    unsafe {
        let d = default_vfs(vfs);
        (*d).xRandomness.map_or(0, |f| f(d, n, out))
    }
}

unsafe extern "C" fn x_sleep(_vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    // Never sleep in real time inside a simulation: busy waits happen in simulated time.
    micros
}

unsafe extern "C" fn x_current_time(vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    unsafe {
        let d = default_vfs(vfs);
        (*d).xCurrentTime.map_or(ffi::SQLITE_ERROR, |f| f(d, out))
    }
}

unsafe extern "C" fn x_current_time_int64(vfs: *mut ffi::sqlite3_vfs, out: *mut i64) -> c_int {
    unsafe {
        let d = default_vfs(vfs);
        (*d).xCurrentTimeInt64.map_or(ffi::SQLITE_ERROR, |f| f(d, out))
    }
}

unsafe extern "C" fn x_get_last_error(
    _vfs: *mut ffi::sqlite3_vfs,
    _n: c_int,
    _z: *mut c_char,
) -> c_int {
    0
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let f = file as *mut File;
        if (*f).handle.is_null() {
            return ffi::SQLITE_OK;
        }
        // Release whatever the connection still holds, as closing a file descriptor does.
        x_unlock(file, NONE);
        if handle(file).shm_mapped {
            x_shm_unmap(file, 0);
        }
        let h = Box::from_raw((*f).handle);
        (*f).handle = ptr::null_mut();
        if h.delete_on_close
            && let Some(n) = &h.name
        {
            let gone = registry().remove(n);
            drop(h);
            recycle(gone);
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    let h = unsafe { handle(file) };
    let inode = lock(&h.inode);
    let (amt, offset) = (amt as usize, offset as usize);
    let out = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, amt) };
    let available = inode.data.len().saturating_sub(offset).min(amt);
    if available > 0 {
        out[..available].copy_from_slice(&inode.data[offset..offset + available]);
    }
    if available < amt {
        out[available..].fill(0);
        return ffi::SQLITE_IOERR_SHORT_READ;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    let h = unsafe { handle(file) };
    let mut guard = lock(&h.inode);
    let inode = &mut *guard;
    let (amt, offset) = (amt as usize, offset as usize);
    let end = offset + amt;
    let src = unsafe { std::slice::from_raw_parts(buf as *const u8, amt) };
    let len = inode.data.len();
    inode.touch(offset.min(len), end);
    if end <= len {
        inode.data[offset..end].copy_from_slice(src);
        return ffi::SQLITE_OK;
    }
    // Growing: room for a whole journal at once (a journal starts empty at every write
    // transaction), a hole before `offset` reads as zeros, and no byte is written twice.
    if end > inode.data.capacity() {
        inode.data.reserve(end.max(GROW) - len);
    }
    if offset >= len {
        inode.data.resize(offset, 0);
        inode.data.extend_from_slice(src);
    } else {
        let (over, rest) = src.split_at(len - offset);
        inode.data[offset..].copy_from_slice(over);
        inode.data.extend_from_slice(rest);
    }
    ffi::SQLITE_OK
}

/// The least a growing file reserves (bytes).
const GROW: usize = 64 * 1024;

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    let h = unsafe { handle(file) };
    lock(&h.inode).data.truncate(size as usize);
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_sync(_file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_file_size(
    file: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    let h = unsafe { handle(file) };
    unsafe { *size = lock(&h.inode).data.len() as ffi::sqlite3_int64 };
    ffi::SQLITE_OK
}

/// `unixLock` for connections of one process (its POSIX calls always succeed in-process).
unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, want: c_int) -> c_int {
    let h = unsafe { handle(file) };
    if h.level >= want {
        return ffi::SQLITE_OK;
    }
    let mut i = lock(&h.inode);
    // Another connection holds a lock that precludes this one.
    if h.level != i.level && (i.level >= PENDING || want > SHARED) {
        return ffi::SQLITE_BUSY;
    }
    // SHARED while others hold SHARED or RESERVED: join them.
    if want == SHARED && (i.level == SHARED || i.level == RESERVED) {
        h.level = SHARED;
        i.shared += 1;
        return ffi::SQLITE_OK;
    }
    // EXCLUSIVE from RESERVED passes through PENDING (new readers are kept out from here on).
    if want == EXCLUSIVE && h.level == RESERVED {
        h.level = PENDING;
        i.level = PENDING;
    }
    if want == SHARED {
        h.level = SHARED;
        i.level = SHARED;
        i.shared = 1;
        return ffi::SQLITE_OK;
    }
    if want == EXCLUSIVE && i.shared > 1 {
        // Other connections still read: stay at PENDING (if reached) and report BUSY.
        return ffi::SQLITE_BUSY;
    }
    h.level = want;
    i.level = want;
    ffi::SQLITE_OK
}

/// `posixUnlock` for connections of one process.
unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, want: c_int) -> c_int {
    let h = unsafe { handle(file) };
    if h.level <= want {
        return ffi::SQLITE_OK;
    }
    let mut i = lock(&h.inode);
    if h.level > SHARED {
        i.level = SHARED;
    }
    if want == NONE {
        i.shared -= 1;
        if i.shared == 0 {
            i.level = NONE;
        }
    }
    h.level = want;
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let h = unsafe { handle(file) };
    unsafe { *out = (lock(&h.inode).level > SHARED) as c_int };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_file_control(
    _file: *mut ffi::sqlite3_file,
    _op: c_int,
    _arg: *mut c_void,
) -> c_int {
    ffi::SQLITE_NOTFOUND
}

unsafe extern "C" fn x_sector_size(_file: *mut ffi::sqlite3_file) -> c_int {
    4096
}

unsafe extern "C" fn x_device_characteristics(_file: *mut ffi::sqlite3_file) -> c_int {
    ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let h = unsafe { handle(file) };
    let mut i = lock(&h.inode);
    let shm = i.shm.get_or_insert_with(Shm::default);
    if !h.shm_mapped {
        h.shm_mapped = true;
        shm.users += 1;
    }
    let region = region as usize;
    if region >= shm.regions.len() && extend != 0 {
        while shm.regions.len() <= region {
            shm.regions.push(vec![0u8; size as usize].into_boxed_slice());
        }
    }
    unsafe {
        *out = match shm.regions.get_mut(region) {
            Some(r) => r.as_mut_ptr() as *mut c_void,
            None => ptr::null_mut(),
        };
    }
    ffi::SQLITE_OK
}

/// `unixShmLock` for connections of one process.
unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    ofst: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    let h = unsafe { handle(file) };
    let mut i = lock(&h.inode);
    let Some(shm) = i.shm.as_mut() else { return ffi::SQLITE_IOERR_SHMLOCK };
    let (ofst, n) = (ofst as usize, n as usize);
    let mask: u16 = ((1u32 << (ofst + n)) - (1u32 << ofst)) as u16;
    let unlock = flags & ffi::SQLITE_SHM_UNLOCK != 0;
    let shared = flags & ffi::SQLITE_SHM_SHARED != 0;
    if unlock {
        if (h.shm_shared | h.shm_excl) & mask == 0 {
            return ffi::SQLITE_OK;
        }
        if shared && shm.locks[ofst] > 1 {
            shm.locks[ofst] -= 1;
        } else {
            shm.locks[ofst..ofst + n].fill(0);
        }
        h.shm_shared &= !mask;
        h.shm_excl &= !mask;
        return ffi::SQLITE_OK;
    }
    if shared {
        if h.shm_shared & mask != 0 {
            return ffi::SQLITE_OK;
        }
        if shm.locks[ofst] < 0 {
            return ffi::SQLITE_BUSY;
        }
        shm.locks[ofst] += 1;
        h.shm_shared |= mask;
        return ffi::SQLITE_OK;
    }
    if shm.locks[ofst..ofst + n].iter().any(|l| *l != 0) {
        return ffi::SQLITE_BUSY;
    }
    shm.locks[ofst..ofst + n].fill(-1);
    h.shm_excl |= mask;
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shm_barrier(_file: *mut ffi::sqlite3_file) {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    let h = unsafe { handle(file) };
    if !h.shm_mapped {
        return ffi::SQLITE_OK;
    }
    let mut i = lock(&h.inode);
    if let Some(shm) = i.shm.as_mut() {
        // Drop this connection's locks, as closing its descriptor does.
        for slot in 0..SHM_SLOTS {
            let bit = 1u16 << slot;
            if h.shm_excl & bit != 0 {
                shm.locks[slot] = 0;
            } else if h.shm_shared & bit != 0 {
                shm.locks[slot] -= 1;
            }
        }
        shm.users -= 1;
        if shm.users == 0 && delete != 0 {
            i.shm = None;
        }
    }
    h.shm_shared = 0;
    h.shm_excl = 0;
    h.shm_mapped = false;
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests;
