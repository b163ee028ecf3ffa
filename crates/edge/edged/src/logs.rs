//! Container logs as kubelet keeps them, and read back as `kubectl logs`
//! prints them.
//!
//! Each attempt of a container has its own file,
//! `{pod dir}/logs/{container}/{attempt}.log` (kubelet's layout); when an
//! attempt starts, the files of attempts other than it and the one before
//! it go ([`prune_attempts`]), so `--previous` has the attempt before.
//!
//! A file holds the CRI log format containerd writes: one record a line,
//! `{RFC 3339 UTC time, 9 digits} {stdout|stderr} {F|P} {content}`. `F`
//! ends a line of output; a line longer than [`MAX_LINE`] is cut into `P`
//! records of that size and a last `F`, and output that ends without a
//! newline is one last `P`. The process runtime writes this format itself
//! ([`pump`] through [`LogFile`]), which rotates at a cap by renaming to
//! `{file}.1`; containerd writes it for the CRI runtime.
//!
//! [`stream_log`] reads a file back with kubelet's `ReadLogs` rules
//! (`pkg/kubelet/kuberuntime/logs/logs.go`): `tailLines` counts the file's
//! records, `sinceSeconds`/`sinceTime` skip older records, `timestamps`
//! prefixes each line with its record's time, `limitBytes` cuts the output,
//! and `follow` waits for more, across rotations. Two differences, both so
//! that a damaged or long log reads well: a line that is not a CRI record
//! is output as it is (kubelet drops it), and with `timestamps` a line cut
//! into `P` records has one prefix, its first record's time (kubelet
//! prefixes each record, inside the line).

use std::io::SeekFrom;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use edgehive_model::session::LogOptions;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use tokio::sync::mpsc;

/// Longest content of one record: a longer line is cut into `P` records
/// (containerd's default `max_container_log_line_size`).
pub(crate) const MAX_LINE: usize = 16 * 1024;

/// Largest chunk [`stream_log`] sends at once.
pub(crate) const CHUNK: usize = 32 * 1024;

/// How often a followed log is checked for more while it has none.
const FOLLOW_POLL: Duration = Duration::from_millis(50);

/// How much of a file is read at once.
const READ_BLOCK: usize = 64 * 1024;

/// Longest line [`stream_log`] holds while it waits for its end: a file
/// that is not a CRI log may have no newline at all. Past this, what is
/// held is output as it is.
const MAX_HELD: usize = 1 << 20;

/// The log file of one attempt of a container: `{pod dir}/logs/{container}/{attempt}.log`.
pub(crate) fn log_path(pod_dir: &Path, container: &str, attempt: u32) -> PathBuf {
    pod_dir.join("logs").join(container).join(format!("{attempt}.log"))
}

/// Before `attempt` of `container` starts: makes its log directory and
/// removes the log files (rotated ones too) of every attempt but this one
/// and the one before (kubelet keeps those two), and the single log file
/// of the layout before per-attempt files. Attempts numbered above this
/// one are an earlier run's (the process runtime counts from 0 again after
/// a restart of edged): they go too.
pub(crate) async fn prune_attempts(pod_dir: &Path, container: &str, attempt: u32) -> std::io::Result<()> {
    let logs = pod_dir.join("logs");
    let dir = logs.join(container);
    tokio::fs::create_dir_all(&dir).await?;
    for old in [format!("{container}.log"), format!("{container}.log.1")] {
        let _ = tokio::fs::remove_file(logs.join(old)).await;
    }
    let keep = |n: u32| n == attempt || attempt.checked_sub(1) == Some(n);
    let mut entries = tokio::fs::read_dir(&dir).await?;
    while let Some(e) = entries.next_entry().await? {
        let name = e.file_name();
        let Some(n) = name.to_str().and_then(attempt_of) else { continue };
        if !keep(n) {
            let _ = tokio::fs::remove_file(e.path()).await;
        }
    }
    Ok(())
}

/// The attempt a log file's name (`{n}.log`, `{n}.log.1`, …) is of.
fn attempt_of(name: &str) -> Option<u32> {
    let (n, rest) = name.split_once(".log")?;
    (rest.is_empty() || rest.starts_with('.')).then_some(())?;
    n.parse().ok()
}

/// Which of a container's outputs a record is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// One record of a CRI log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) time: OffsetDateTime,
    pub(crate) stream: Stream,
    /// `P`: the line goes on in the next record of its stream.
    pub(crate) partial: bool,
    pub(crate) content: &'a [u8],
}

fn split_space(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = s.iter().position(|b| *b == b' ')?;
    Some((&s[..i], &s[i + 1..]))
}

/// Parses one line of a CRI log (without its newline) as kubelet does:
/// an RFC 3339 time (any number of fraction digits), `stdout` or
/// `stderr`, tags (`P` first: partial; anything else: full), the content.
pub(crate) fn parse_record(line: &[u8]) -> Option<Record<'_>> {
    let (time, rest) = split_space(line)?;
    let time = OffsetDateTime::parse(std::str::from_utf8(time).ok()?, &Rfc3339).ok()?;
    let (stream, rest) = split_space(rest)?;
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    let (tags, content) = split_space(rest)?;
    let partial = tags.split(|b| *b == b':').next() == Some(b"P");
    Some(Record { time, stream, partial, content })
}

/// A time as kubelet prints it (`RFC3339NanoFixed`): nine fraction digits,
/// `Z` for UTC, the offset otherwise.
pub(crate) fn format_time(t: OffsetDateTime) -> String {
    let offset = t.offset();
    let zone = if offset.is_utc() {
        "Z".to_owned()
    } else {
        let (h, m, _) = offset.as_hms();
        format!("{}{:02}:{:02}", if offset.is_negative() { '-' } else { '+' }, h.unsigned_abs(), m.unsigned_abs())
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}{zone}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.nanosecond()
    )
}

/// Appends one record, with its newline, to `out`.
pub(crate) fn format_record(out: &mut Vec<u8>, time: OffsetDateTime, stream: Stream, partial: bool, content: &[u8]) {
    out.extend_from_slice(format_time(time.to_offset(time::UtcOffset::UTC)).as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.name().as_bytes());
    out.extend_from_slice(if partial { b" P " } else { b" F " });
    out.extend_from_slice(content);
    out.push(b'\n');
}

/// Cuts one output stream into records, as containerd's CRI logger does:
/// a line (its `\n`, and a `\r` before it, dropped) is one `F` record; a
/// line longer than [`MAX_LINE`] gives `P` records of that many bytes
/// first; what is left without a newline at the end is a `P` record.
#[derive(Debug, Default)]
pub(crate) struct LineSplitter {
    held: Vec<u8>,
}

impl LineSplitter {
    /// Feeds output; `emit(partial, content)` for each record it completes.
    pub(crate) fn feed(&mut self, mut data: &[u8], emit: &mut impl FnMut(bool, &[u8])) {
        while let Some(i) = data.iter().position(|b| *b == b'\n') {
            let mut line = &data[..i];
            if let Some(l) = line.strip_suffix(b"\r") {
                line = l;
            } else if line.is_empty() && self.held.last() == Some(&b'\r') {
                self.held.pop();
            }
            self.push(line, emit);
            emit(false, &self.held);
            self.held.clear();
            data = &data[i + 1..];
        }
        self.push(data, emit);
    }

    /// The end of the stream: what is held goes as a `P` record.
    pub(crate) fn finish(&mut self, emit: &mut impl FnMut(bool, &[u8])) {
        if !self.held.is_empty() {
            emit(true, &self.held);
            self.held.clear();
        }
    }

    fn push(&mut self, mut part: &[u8], emit: &mut impl FnMut(bool, &[u8])) {
        while self.held.len() + part.len() > MAX_LINE {
            let take = MAX_LINE - self.held.len();
            if self.held.is_empty() {
                emit(true, &part[..take]);
            } else {
                self.held.extend_from_slice(&part[..take]);
                emit(true, &self.held);
                self.held.clear();
            }
            part = &part[take..];
        }
        self.held.extend_from_slice(part);
    }
}

/// A CRI log file being written, rotated by itself: once the next record
/// would take it past its cap, it is renamed to `{path}.1` (replacing an
/// older one) and a new file is begun. A reader that follows the path sees
/// the inode change and goes on in the new file.
#[derive(Debug)]
pub(crate) struct LogFile {
    path: PathBuf,
    /// Written on tokio's blocking pool with std's file: tokio's own file
    /// keeps a buffer as large as its largest write, per container.
    file: Option<std::sync::Arc<std::fs::File>>,
    size: u64,
    cap: u64,
    /// A write failed and has not succeeded since (warned once).
    failing: bool,
}

impl LogFile {
    /// Opens (creates, or appends to) `path`, rotated past `cap` bytes.
    pub(crate) async fn open(path: &Path, cap: u64) -> std::io::Result<LogFile> {
        let file = Self::open_file(path).await?;
        let size = file.metadata()?.len();
        Ok(LogFile { path: path.to_owned(), file: Some(file), size, cap, failing: false })
    }

    async fn open_file(path: &Path) -> std::io::Result<std::sync::Arc<std::fs::File>> {
        let f = tokio::fs::OpenOptions::new().create(true).append(true).open(path).await?;
        Ok(std::sync::Arc::new(f.into_std().await))
    }

    /// Appends `records` (each a whole line of the format), rotating
    /// between them as the cap says. A failure is logged, not returned:
    /// the container's output is drained all the same.
    pub(crate) async fn append(&mut self, records: &[Vec<u8>]) {
        let mut batch: Vec<u8> = Vec::new();
        for r in records {
            let filled = self.size + batch.len() as u64;
            if filled > 0 && filled + r.len() as u64 > self.cap {
                self.write(std::mem::take(&mut batch)).await;
                self.rotate().await;
            }
            batch.extend_from_slice(r);
        }
        self.write(batch).await;
    }

    async fn write(&mut self, data: Vec<u8>) {
        if data.is_empty() {
            return;
        }
        if self.file.is_none() {
            match Self::open_file(&self.path).await {
                Ok(f) => {
                    self.size = f.metadata().map_or(0, |m| m.len());
                    self.file = Some(f);
                }
                Err(e) => return self.failed(&e),
            }
        }
        let Some(file) = self.file.clone() else { return };
        let len = data.len() as u64;
        let written = tokio::task::spawn_blocking(move || std::io::Write::write_all(&mut &*file, &data))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        match written {
            Ok(()) => {
                self.size += len;
                self.failing = false;
            }
            Err(e) => self.failed(&e),
        }
    }

    fn failed(&mut self, e: &std::io::Error) {
        if !self.failing {
            tracing::warn!(log = %self.path.display(), error = %e, "container output not written to its log");
        }
        self.failing = true;
    }

    async fn rotate(&mut self) {
        drop(self.file.take());
        let mut rotated = self.path.clone().into_os_string();
        rotated.push(".1");
        if let Err(e) = tokio::fs::rename(&self.path, &rotated).await {
            tracing::warn!(log = %self.path.display(), error = %e, "log not rotated");
        }
        self.size = 0;
        match Self::open_file(&self.path).await {
            Ok(f) => {
                self.size = f.metadata().map_or(0, |m| m.len());
                self.file = Some(f);
            }
            Err(e) => self.failed(&e),
        }
    }
}

/// What the pump reads: a container's output pipe (bytes, in tests).
pub(crate) trait Output: Send {
    /// Waits until a read may return data or the end.
    fn ready(&mut self) -> impl std::future::Future<Output = std::io::Result<()>> + Send;
    /// Reads what is there now (`WouldBlock` when nothing is).
    fn read_now(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
}

impl Output for tokio::net::unix::pipe::Receiver {
    async fn ready(&mut self) -> std::io::Result<()> {
        self.readable().await
    }
    fn read_now(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.try_read(buf)
    }
}

impl Output for &[u8] {
    async fn ready(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn read_now(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::io::Read::read(self, buf)
    }
}

/// Waits for `r` to be readable, or never when there is nothing to read from.
async fn ready_of<R: Output>(r: &mut Option<R>) -> std::io::Result<()> {
    match r {
        Some(r) => r.ready().await,
        None => std::future::pending().await,
    }
}

/// How much of a pipe is read at once.
const PUMP_READ: usize = 16 * 1024;

/// Copies a container's stdout and stderr into `log` as CRI records, until
/// both end (every process holding them has closed them). It reads as fast
/// as the file takes the records, so a container waits on it only when its
/// pipe's buffer is full and the disk is slower than its output. A read
/// buffer exists only while there is output to read: an idle container
/// costs its task and nothing more.
pub(crate) async fn pump<O: Output, E: Output>(mut stdout: Option<O>, mut stderr: Option<E>, mut log: LogFile) {
    let mut splitters = [LineSplitter::default(), LineSplitter::default()];
    while stdout.is_some() || stderr.is_some() {
        // Stdout first when both have output: a process that writes a line
        // to each, one after the other, mostly writes stdout first (which
        // was first cannot be known once both pipes hold data).
        let (stream, ready) = tokio::select! {
            biased;
            r = ready_of(&mut stdout) => (Stream::Stdout, r),
            r = ready_of(&mut stderr) => (Stream::Stderr, r),
        };
        let mut buf = vec![0u8; PUMP_READ];
        let read = ready.and_then(|()| match stream {
            Stream::Stdout => stdout.as_mut().map_or(Ok(0), |r| r.read_now(&mut buf)),
            Stream::Stderr => stderr.as_mut().map_or(Ok(0), |r| r.read_now(&mut buf)),
        });
        if matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
            continue;
        }
        let (splitter, data) = match stream {
            Stream::Stdout => (&mut splitters[0], &buf),
            Stream::Stderr => (&mut splitters[1], &buf),
        };
        let mut records = Vec::new();
        let now = OffsetDateTime::now_utc();
        let mut emit = |partial: bool, content: &[u8]| {
            let mut r = Vec::with_capacity(content.len() + 48);
            format_record(&mut r, now, stream, partial, content);
            records.push(r);
        };
        match read {
            Ok(n) if n > 0 => splitter.feed(&data[..n], &mut emit),
            end => {
                if let Err(e) = end {
                    tracing::warn!(log = %log.path.display(), error = %e, stream = stream.name(), "container output unreadable");
                }
                splitter.finish(&mut emit);
                match stream {
                    Stream::Stdout => stdout = None,
                    Stream::Stderr => stderr = None,
                }
            }
        }
        log.append(&records).await;
    }
}

/// Whether to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    More,
    Stop,
}

/// What `kubectl logs` asked for, applied line by line to a log's lines
/// (no I/O: it turns lines of the file into output).
#[derive(Debug)]
struct LogFilter {
    since: Option<OffsetDateTime>,
    timestamps: bool,
    /// Bytes still to output (`limitBytes`).
    remain: Option<u64>,
    /// Lines still to output when `tailLines` is given without `follow`
    /// (kubelet's "limited mode": lines written meanwhile are not read).
    lines_left: Option<u64>,
    /// A stream's line is begun (its last record was `P`): the next record
    /// of that stream goes on in the same output line.
    mid_line: [bool; 2],
}

impl LogFilter {
    fn new(opts: &LogOptions, now: OffsetDateTime) -> LogFilter {
        let mut since = opts
            .since_seconds
            .and_then(|s| i64::try_from(s).ok())
            .and_then(|s| now.checked_sub(time::Duration::seconds(s)));
        if let Some(t) = opts.since_time.as_deref().and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
            && since.is_none_or(|s| t > s)
        {
            since = Some(t);
        }
        LogFilter {
            since,
            timestamps: opts.timestamps,
            remain: opts.limit_bytes,
            lines_left: opts.tail_lines.filter(|_| !opts.follow),
            mid_line: [false; 2],
        }
    }

    /// Whether anything more may be output.
    fn done(&self) -> bool {
        self.remain == Some(0) || self.lines_left == Some(0)
    }

    /// Outputs one line of the file (`line` without its newline;
    /// `terminated`: it had one) into `out`.
    fn line(&mut self, line: &[u8], terminated: bool, out: &mut BytesMut) -> Flow {
        if self.done() {
            return Flow::Stop;
        }
        match parse_record(line) {
            Some(r) if self.since.is_some_and(|s| r.time < s) => {}
            Some(r) => {
                let open = &mut self.mid_line[r.stream as usize];
                let prefix = self.timestamps && !*open;
                *open = r.partial;
                if prefix {
                    let mut p = format_time(r.time);
                    p.push(' ');
                    self.emit(p.as_bytes(), out);
                }
                self.emit(r.content, out);
                if !r.partial && terminated {
                    self.emit(b"\n", out);
                }
            }
            // Not a CRI record: as it is.
            None => {
                self.emit(line, out);
                if terminated {
                    self.emit(b"\n", out);
                }
            }
        }
        if let Some(n) = &mut self.lines_left {
            *n = n.saturating_sub(1);
        }
        if self.done() { Flow::Stop } else { Flow::More }
    }

    fn emit(&mut self, data: &[u8], out: &mut BytesMut) {
        let n = match &mut self.remain {
            Some(remain) => {
                let n = data.len().min(usize::try_from(*remain).unwrap_or(usize::MAX));
                *remain -= n as u64;
                n
            }
            None => data.len(),
        };
        out.extend_from_slice(&data[..n]);
    }
}

/// Output on its way to the reader, in chunks of at most [`CHUNK`].
struct Sink<'a> {
    out: &'a mpsc::Sender<Bytes>,
    buf: BytesMut,
}

impl Sink<'_> {
    /// Sends the full chunks; false when the reader went away.
    async fn send_full(&mut self) -> bool {
        while self.buf.len() >= CHUNK {
            if self.out.send(self.buf.split_to(CHUNK).freeze()).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Sends everything; false when the reader went away.
    async fn flush(&mut self) -> bool {
        if !self.send_full().await {
            return false;
        }
        self.buf.is_empty() || self.out.send(self.buf.split().freeze()).await.is_ok()
    }
}

/// An open log file read line by line, to its current end and on.
struct Reader {
    file: tokio::fs::File,
    ino: u64,
    /// Bytes read from the file so far (its read position).
    read: u64,
    /// The start of a line whose end is not read yet.
    held: Vec<u8>,
    block: Vec<u8>,
}

impl Reader {
    /// Opens `path`; `None` when there is no such file.
    async fn open(path: &Path) -> std::io::Result<Option<Reader>> {
        match tokio::fs::File::open(path).await {
            Ok(file) => {
                let ino = file.metadata().await?.ino();
                Ok(Some(Reader { file, ino, read: 0, held: Vec::new(), block: vec![0u8; READ_BLOCK] }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Moves to the start of the last `n` lines, as kubelet's tail does: a
    /// line without its newline at the end counts for none.
    async fn tail(&mut self, n: u64) -> std::io::Result<()> {
        let size = self.file.seek(SeekFrom::End(0)).await?;
        let block = &mut self.block;
        let (mut right, mut newlines, mut start) = (size, 0u64, 0u64);
        'scan: while right > 0 {
            let left = right.saturating_sub(READ_BLOCK as u64);
            let len = usize::try_from(right - left).unwrap_or(READ_BLOCK);
            self.file.seek(SeekFrom::Start(left)).await?;
            if self.file.read_exact(&mut block[..len]).await.is_err() {
                // Cut meanwhile: all of what is left.
                break;
            }
            for (i, b) in block[..len].iter().enumerate().rev() {
                if *b == b'\n' {
                    newlines += 1;
                    if newlines > n {
                        start = left + i as u64 + 1;
                        break 'scan;
                    }
                }
            }
            right = left;
        }
        self.read = self.file.seek(SeekFrom::Start(start)).await?;
        Ok(())
    }

    /// Reads to the end of the file, each complete line through `filter`
    /// into `sink`; an incomplete last line is held for the next call.
    async fn drain(&mut self, filter: &mut LogFilter, sink: &mut Sink<'_>) -> std::io::Result<Flow> {
        let mut block = std::mem::take(&mut self.block);
        let flow = self.drain_into(&mut block, filter, sink).await;
        self.block = block;
        flow
    }

    async fn drain_into(
        &mut self,
        block: &mut [u8],
        filter: &mut LogFilter,
        sink: &mut Sink<'_>,
    ) -> std::io::Result<Flow> {
        loop {
            let n = self.file.read(block).await?;
            if n == 0 {
                return Ok(Flow::More);
            }
            self.read += n as u64;
            let mut data = &block[..n];
            while let Some(i) = data.iter().position(|b| *b == b'\n') {
                let flow = if self.held.is_empty() {
                    filter.line(&data[..i], true, &mut sink.buf)
                } else {
                    self.held.extend_from_slice(&data[..i]);
                    let flow = filter.line(&self.held, true, &mut sink.buf);
                    self.held.clear();
                    flow
                };
                if flow == Flow::Stop {
                    return Ok(Flow::Stop);
                }
                data = &data[i + 1..];
            }
            self.held.extend_from_slice(data);
            if self.held.len() > MAX_HELD
                && filter.line(&std::mem::take(&mut self.held), false, &mut sink.buf) == Flow::Stop
            {
                return Ok(Flow::Stop);
            }
            if !sink.send_full().await {
                return Ok(Flow::Stop);
            }
        }
    }

    /// The file is done with: its incomplete last line goes out as it is.
    fn finish(&mut self, filter: &mut LogFilter, sink: &mut Sink<'_>) -> Flow {
        if self.held.is_empty() {
            return Flow::More;
        }
        filter.line(&std::mem::take(&mut self.held), false, &mut sink.buf)
    }
}

/// Waits one poll period; false when the reader went away meanwhile.
async fn pause(out: &mpsc::Sender<Bytes>) -> bool {
    tokio::select! {
        () = tokio::time::sleep(FOLLOW_POLL) => true,
        () = out.closed() => false,
    }
}

/// Streams a container's log the way `kubectl logs` prints it.
///
/// `path` is the attempt's log file (current or previous); `writing` says
/// whether the attempt may still write to it: `follow` ends once it says
/// no and the file is read to its end. Output goes to `out` in chunks of at
/// most [`CHUNK`]; when `out` is closed, the stream stops (`Ok`). A missing
/// file is an empty log (followed while `writing`, until it appears).
pub(crate) async fn stream_log(
    path: &Path,
    opts: &LogOptions,
    writing: &(dyn Fn() -> bool + Send + Sync),
    out: &mpsc::Sender<Bytes>,
) -> std::io::Result<()> {
    let mut filter = LogFilter::new(opts, OffsetDateTime::now_utc());
    let mut sink = Sink { out, buf: BytesMut::new() };
    if filter.done() {
        return Ok(());
    }
    let mut reader = loop {
        if let Some(r) = Reader::open(path).await? {
            break r;
        }
        if !(opts.follow && writing() && pause(out).await) {
            return Ok(());
        }
    };
    if let Some(n) = opts.tail_lines {
        reader.tail(n).await?;
    }
    loop {
        // Sampled before the read: when the writer had finished then, the
        // read gets all it wrote.
        let was_writing = writing();
        if reader.drain(&mut filter, &mut sink).await? == Flow::Stop {
            break;
        }
        if !opts.follow {
            reader.finish(&mut filter, &mut sink);
            break;
        }
        match tokio::fs::metadata(path).await {
            // Rotated (renamed away, a new file in its place): the old one
            // to its end, then the new one from its start.
            Ok(m) if m.ino() != reader.ino => {
                if reader.drain(&mut filter, &mut sink).await? == Flow::Stop
                    || reader.finish(&mut filter, &mut sink) == Flow::Stop
                {
                    break;
                }
                if let Some(next) = Reader::open(path).await? {
                    reader = next;
                    continue;
                }
            }
            // Cut (copytruncate): from its start again.
            Ok(m) if m.len() < reader.read => {
                if reader.finish(&mut filter, &mut sink) == Flow::Stop {
                    break;
                }
                reader.read = reader.file.seek(SeekFrom::Start(0)).await?;
                continue;
            }
            _ => {}
        }
        if !was_writing {
            reader.finish(&mut filter, &mut sink);
            break;
        }
        if !sink.flush().await || !pause(out).await {
            return Ok(());
        }
    }
    sink.flush().await;
    Ok(())
}

/// The output of a CRI log file as `kubectl logs` prints it (tests read
/// what containers wrote through it).
#[cfg(test)]
pub(crate) fn log_text(path: &Path) -> String {
    let data = std::fs::read(path).unwrap_or_default();
    let mut filter = LogFilter::new(&LogOptions::default(), OffsetDateTime::now_utc());
    let mut out = BytesMut::new();
    for line in data.split_inclusive(|b| *b == b'\n') {
        match line.strip_suffix(b"\n") {
            Some(l) => filter.line(l, true, &mut out),
            None => filter.line(line, false, &mut out),
        };
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use edgehive_testkit::fixtures::TempDir;

    use super::*;

    /// 2024-01-02T03:04:05Z plus `s` seconds and `ns` nanoseconds.
    fn at(s: i64, ns: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(1_704_164_645 + s) * 1_000_000_000 + i128::from(ns))
            .unwrap()
    }

    fn record(time: OffsetDateTime, stream: Stream, partial: bool, content: &str) -> Vec<u8> {
        let mut r = Vec::new();
        format_record(&mut r, time, stream, partial, content.as_bytes());
        r
    }

    /// A log of the records, one second apart from [`at`]`(0, 0)`.
    fn write_log(path: &Path, records: &[(Stream, bool, &str)]) {
        let mut data = Vec::new();
        for (i, (stream, partial, content)) in records.iter().enumerate() {
            data.extend(record(at(i as i64, 0), *stream, *partial, content));
        }
        std::fs::write(path, data).unwrap();
    }

    /// Everything `stream_log` outputs for a log that is not followed.
    async fn read(path: &Path, opts: LogOptions) -> String {
        let (tx, mut rx) = mpsc::channel(1024);
        stream_log(path, &opts, &|| false, &tx).await.unwrap();
        drop(tx);
        let mut out = Vec::new();
        while let Some(b) = rx.recv().await {
            assert!(b.len() <= CHUNK);
            out.extend_from_slice(&b);
        }
        String::from_utf8(out).unwrap()
    }

    /// A followed log: the reader's task, what it output so far, and the
    /// switch that says the attempt still writes.
    struct Following {
        rx: mpsc::Receiver<Bytes>,
        seen: String,
        writing: Arc<AtomicBool>,
        task: tokio::task::JoinHandle<std::io::Result<()>>,
    }

    fn follow(path: &Path, opts: LogOptions) -> Following {
        let (tx, rx) = mpsc::channel(16);
        let writing = Arc::new(AtomicBool::new(true));
        let w = Arc::clone(&writing);
        let path = path.to_owned();
        let task = tokio::spawn(async move {
            let opts = LogOptions { follow: true, ..opts };
            stream_log(&path, &opts, &move || w.load(Ordering::SeqCst), &tx).await
        });
        Following { rx, seen: String::new(), writing, task }
    }

    impl Following {
        /// Waits (up to `within`) until the output so far is `want`.
        async fn until(&mut self, want: &str, within: Duration) {
            let deadline = tokio::time::Instant::now() + within;
            while self.seen != want {
                assert!(want.starts_with(&self.seen), "output {:?} is not a start of {want:?}", self.seen);
                match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                    Ok(Some(b)) => self.seen.push_str(std::str::from_utf8(&b).unwrap()),
                    Ok(None) => panic!("the stream ended at {:?}, before {want:?}", self.seen),
                    Err(_) => panic!("not {want:?} within {within:?}: {:?}", self.seen),
                }
            }
        }

        /// The attempt stops writing: the stream ends (within a second) with `rest` more.
        async fn ends_with(mut self, rest: &str) {
            self.writing.store(false, Ordering::SeqCst);
            let want = format!("{}{rest}", self.seen);
            self.until(&want, Duration::from_secs(1)).await;
            let end = tokio::time::timeout(Duration::from_secs(1), self.rx.recv()).await;
            assert!(matches!(end, Ok(None)), "more after the end: {end:?}");
            tokio::time::timeout(Duration::from_secs(1), self.task).await.unwrap().unwrap().unwrap();
        }
    }

    fn append(path: &Path, data: &[u8]) {
        use std::io::Write as _;
        std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap().write_all(data).unwrap();
    }

    #[test]
    fn paths_are_per_attempt_and_records_parse_as_kubelet_parses_them() {
        assert_eq!(log_path(Path::new("/p/uid"), "web", 3), Path::new("/p/uid/logs/web/3.log"));
        assert_eq!(attempt_of("3.log"), Some(3));
        assert_eq!(attempt_of("12.log.1"), Some(12));
        assert_eq!(attempt_of("web.log"), None);
        assert_eq!(attempt_of("3.logx"), None);

        let r = record(at(0, 5), Stream::Stderr, true, "a b");
        assert_eq!(std::str::from_utf8(&r).unwrap(), "2024-01-02T03:04:05.000000005Z stderr P a b\n");
        let parsed = parse_record(&r[..r.len() - 1]).unwrap();
        assert_eq!(parsed, Record { time: at(0, 5), stream: Stream::Stderr, partial: true, content: b"a b" });
        // Any number of fraction digits, an offset, tags after `:`, empty content.
        let r = parse_record(b"2016-10-06T02:17:09.6697+02:00 stdout F:x ").unwrap();
        assert_eq!(r.time, OffsetDateTime::parse("2016-10-06T00:17:09.6697Z", &Rfc3339).unwrap());
        assert_eq!((r.stream, r.partial, r.content), (Stream::Stdout, false, &b""[..]));
        assert_eq!(format_time(r.time), "2016-10-06T02:17:09.669700000+02:00");
        assert!(parse_record(b"2016-10-06T00:17:09Z stdout P:x y").unwrap().partial);
        for bad in [
            &b"hello world"[..],
            b"2016-10-06T00:17:09Z stdin F x",
            b"2016-10-06T00:17:09Z stdout F",
            b"not-a-time stdout F x",
        ] {
            assert_eq!(parse_record(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    fn split(chunks: &[&[u8]]) -> Vec<(bool, Vec<u8>)> {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        let mut emit = |p: bool, c: &[u8]| out.push((p, c.to_vec()));
        for c in chunks {
            s.feed(c, &mut emit);
        }
        s.finish(&mut emit);
        out
    }

    #[test]
    fn output_is_cut_into_records_as_containerd_cuts_it() {
        let f = |c: &[u8]| (false, c.to_vec());
        let p = |c: &[u8]| (true, c.to_vec());
        assert_eq!(split(&[b"a\nb", b"c\r\n\n", b"end"]), [f(b"a"), f(b"bc"), f(b""), p(b"end")]);
        // A `\r\n` split across reads.
        assert_eq!(split(&[b"x\r", b"\n"]), [f(b"x")]);
        let x = vec![b'x'; 2 * MAX_LINE + 5];
        // Exactly the longest: one F; one more byte: a P of the longest, then F.
        let mut line = x[..MAX_LINE].to_vec();
        line.push(b'\n');
        assert_eq!(split(&[&line]), [f(&x[..MAX_LINE])]);
        line.insert(0, b'x');
        assert_eq!(split(&[&line]), [p(&x[..MAX_LINE]), f(b"x")]);
        // Long, fed in small pieces, ending without a newline.
        let pieces: Vec<&[u8]> = x.chunks(1000).collect();
        assert_eq!(split(&pieces), [p(&x[..MAX_LINE]), p(&x[..MAX_LINE]), p(b"xxxxx")]);
        assert_eq!(split(&[b""]), []);
    }

    #[tokio::test]
    async fn the_pump_writes_both_streams_and_rotates_at_its_cap() {
        let dir = TempDir::new("logs-pump");
        let path = dir.path().join("0.log");
        let stdout: &[u8] = b"one\ntwo\npartial";
        let stderr: &[u8] = b"oops\n";
        pump(Some(stdout), Some(stderr), LogFile::open(&path, LOG_CAP_BIG).await.unwrap()).await;
        let text = std::fs::read_to_string(&path).unwrap();
        let mut recs: Vec<(Stream, bool, String)> = text
            .lines()
            .map(|l| {
                let r = parse_record(l.as_bytes()).unwrap();
                (r.stream, r.partial, String::from_utf8(r.content.to_vec()).unwrap())
            })
            .collect();
        assert_eq!(recs.len(), 4, "{text}");
        let errs: Vec<_> = recs.iter().filter(|r| r.0 == Stream::Stderr).cloned().collect();
        assert_eq!(errs, [(Stream::Stderr, false, "oops".to_owned())]);
        recs.retain(|r| r.0 == Stream::Stdout);
        assert_eq!(
            recs,
            [
                (Stream::Stdout, false, "one".to_owned()),
                (Stream::Stdout, false, "two".to_owned()),
                (Stream::Stdout, true, "partial".to_owned())
            ]
        );

        // A small cap: the file is renamed to `.1` (the older `.1` replaced)
        // before a record would take it past the cap; nothing is lost of
        // the last two files.
        let path = dir.path().join("1.log");
        let lines: String = (0..30).map(|i| format!("line {i:02}\n")).collect();
        let one = record(at(0, 0), Stream::Stdout, false, "line 00").len() as u64;
        pump(Some(lines.as_bytes()), None::<&[u8]>, LogFile::open(&path, 10 * one).await.unwrap()).await;
        let rotated = dir.path().join("1.log.1");
        assert_eq!(std::fs::metadata(&rotated).unwrap().len(), 10 * one);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 10 * one);
        let kept: String = (10..30).map(|i| format!("line {i:02}\n")).collect();
        assert_eq!(log_text(&rotated) + &log_text(&path), kept);
    }

    const LOG_CAP_BIG: u64 = 1 << 20;

    #[tokio::test]
    async fn partial_records_join_and_garbage_passes_through() {
        let dir = TempDir::new("logs-read");
        let path = dir.path().join("0.log");
        write_log(
            &path,
            &[
                (Stream::Stdout, false, "first"),
                (Stream::Stdout, true, "long "),
                (Stream::Stdout, true, "line "),
                (Stream::Stdout, false, "ends"),
                (Stream::Stderr, false, "to stderr"),
                (Stream::Stdout, true, "no newline at the end"),
            ],
        );
        let all = "first\nlong line ends\nto stderr\nno newline at the end";
        assert_eq!(read(&path, LogOptions::default()).await, all);
        // A damaged line, and one left without its newline at the end.
        append(&path, b"\n\x00garbage, not a record\n2024-01-02T03:04:05Z stdout F cut");
        assert_eq!(read(&path, LogOptions::default()).await, format!("{all}\n\x00garbage, not a record\ncut"));
        assert_eq!(read(&dir.path().join("missing.log"), LogOptions::default()).await, "");
        let opts = LogOptions { follow: true, ..Default::default() };
        assert_eq!(read(&dir.path().join("missing.log"), opts).await, "", "followed, but nothing writes it");
    }

    #[tokio::test]
    async fn timestamps_since_tail_and_limit_bytes() {
        let dir = TempDir::new("logs-options");
        let path = dir.path().join("0.log");
        write_log(
            &path,
            &[
                (Stream::Stdout, false, "zero"),
                (Stream::Stdout, true, "one "),
                (Stream::Stdout, false, "and two"),
                (Stream::Stderr, false, "three"),
                (Stream::Stdout, false, "four"),
            ],
        );
        let ts = |s: i64| format_time(at(s, 0));
        let opts = LogOptions { timestamps: true, ..Default::default() };
        assert_eq!(
            read(&path, opts).await,
            format!("{} zero\n{} one and two\n{} three\n{} four\n", ts(0), ts(1), ts(3), ts(4))
        );
        assert_eq!(ts(1), "2024-01-02T03:04:06.000000000Z");

        let since = |t: &str| LogOptions { since_time: Some(t.into()), ..Default::default() };
        assert_eq!(read(&path, since(&ts(3))).await, "three\nfour\n");
        assert_eq!(read(&path, since("2024-01-02T03:04:07.5Z")).await, "three\nfour\n");
        assert_eq!(read(&path, since("2030-01-01T00:00:00Z")).await, "");

        let tail = |n: u64| LogOptions { tail_lines: Some(n), ..Default::default() };
        assert_eq!(read(&path, tail(2)).await, "three\nfour\n");
        assert_eq!(read(&path, tail(3)).await, "and two\nthree\nfour\n", "records are counted, as kubelet counts");
        assert_eq!(read(&path, tail(0)).await, "");
        assert_eq!(read(&path, tail(100)).await, "zero\none and two\nthree\nfour\n");

        let limit = |n: u64| LogOptions { limit_bytes: Some(n), ..Default::default() };
        assert_eq!(read(&path, limit(7)).await, "zero\non");
        assert_eq!(read(&path, limit(5)).await, "zero\n");
        let opts = LogOptions { limit_bytes: Some(40), timestamps: true, ..Default::default() };
        assert_eq!(read(&path, opts).await, format!("{} zero\n{}", ts(0), &ts(1)[..4]));

        // `sinceSeconds` counts back from now; the later of it and `sinceTime` wins.
        let now = OffsetDateTime::now_utc();
        let mut data = record(now - time::Duration::seconds(100), Stream::Stdout, false, "old");
        data.extend(record(now - time::Duration::seconds(1), Stream::Stdout, false, "new"));
        std::fs::write(&path, data).unwrap();
        let recent = LogOptions { since_seconds: Some(10), ..Default::default() };
        assert_eq!(read(&path, recent.clone()).await, "new\n");
        let older = LogOptions { since_time: Some("2000-01-01T00:00:00Z".into()), ..recent };
        assert_eq!(read(&path, older).await, "new\n");
        assert_eq!(read(&path, LogOptions { since_seconds: Some(1000), ..Default::default() }).await, "old\nnew\n");
    }

    #[tokio::test]
    async fn output_comes_in_chunks_of_at_most_32_kib() {
        let dir = TempDir::new("logs-chunks");
        let path = dir.path().join("0.log");
        let line = "y".repeat(10_000);
        let mut data = Vec::new();
        for _ in 0..20 {
            data.extend(record(at(0, 0), Stream::Stdout, false, &line));
        }
        std::fs::write(&path, data).unwrap();
        let (tx, mut rx) = mpsc::channel(1024);
        stream_log(&path, &LogOptions::default(), &|| false, &tx).await.unwrap();
        drop(tx);
        let mut sizes = Vec::new();
        let mut total = 0;
        while let Some(b) = rx.recv().await {
            sizes.push(b.len());
            total += b.len();
        }
        assert_eq!(total, 20 * 10_001);
        assert!(sizes.len() >= 7 && sizes.iter().all(|s| *s <= CHUNK), "{sizes:?}");
    }

    #[tokio::test]
    async fn follow_sees_later_lines_and_ends_when_the_attempt_does() {
        let dir = TempDir::new("logs-follow");
        let path = dir.path().join("0.log");
        write_log(&path, &[(Stream::Stdout, false, "before"), (Stream::Stdout, false, "last before")]);
        let mut f = follow(&path, LogOptions { tail_lines: Some(1), ..Default::default() });
        f.until("last before\n", Duration::from_secs(1)).await;
        // A line written later reaches the reader at once (50 ms polls),
        // half a record first: nothing until its end is there.
        let later = record(at(9, 0), Stream::Stdout, false, "later");
        append(&path, &later[..10]);
        append(&path, &later[10..]);
        f.until("last before\nlater\n", Duration::from_millis(500)).await;
        // What is written just before the attempt ends is not lost.
        append(&path, &record(at(10, 0), Stream::Stdout, false, "final"));
        f.ends_with("final\n").await;

        // `tailLines: 0` while following: only what comes after the reader
        // started (which of the lines that is, the test cannot know).
        let mut f = follow(&path, LogOptions { tail_lines: Some(0), ..Default::default() });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        let mut first = None;
        for i in 0.. {
            append(&path, &record(at(11, 0), Stream::Stdout, false, &format!("new {i}")));
            if let Ok(Some(b)) = tokio::time::timeout(Duration::from_millis(100), f.rx.recv()).await {
                first = Some(String::from_utf8(b.to_vec()).unwrap());
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "nothing came");
        }
        let first = first.unwrap();
        assert!(first.starts_with("new ") && first.ends_with('\n') && !first.contains("final"), "{first:?}");
        // The reader going away ends the stream.
        drop(f.rx);
        tokio::time::timeout(Duration::from_secs(1), f.task).await.unwrap().unwrap().unwrap();
    }

    #[tokio::test]
    async fn follow_goes_on_across_a_rotation_and_a_file_that_appears_later() {
        let dir = TempDir::new("logs-rotate");
        let path = dir.path().join("0.log");
        // Not there yet, but the attempt writes: wait for it.
        let mut f = follow(&path, LogOptions::default());
        write_log(&path, &[(Stream::Stdout, false, "a")]);
        f.until("a\n", Duration::from_secs(1)).await;
        // The writer adds a line, renames the file away and begins a new
        // one: the reader reads the old file to its end, then the new one.
        append(&path, &record(at(1, 0), Stream::Stdout, false, "b"));
        std::fs::rename(&path, dir.path().join("0.log.1")).unwrap();
        write_log(&path, &[(Stream::Stdout, false, "c")]);
        f.until("a\nb\nc\n", Duration::from_secs(1)).await;
        // Cut in place (copytruncate): from the start again. (An empty
        // line, shorter than what was read, so that the cut is seen.)
        std::fs::write(&path, record(at(2, 0), Stream::Stdout, false, "")).unwrap();
        f.until("a\nb\nc\n\n", Duration::from_secs(1)).await;
        append(&path, &record(at(3, 0), Stream::Stdout, false, "d"));
        f.until("a\nb\nc\n\nd\n", Duration::from_secs(1)).await;
        f.ends_with("").await;
    }

    #[tokio::test]
    async fn only_the_current_and_the_previous_attempts_logs_are_kept() {
        let dir = TempDir::new("logs-prune");
        let pod = dir.path();
        let logs = pod.join("logs/web");
        std::fs::create_dir_all(&logs).unwrap();
        for n in 0..6 {
            std::fs::write(logs.join(format!("{n}.log")), "x").unwrap();
            std::fs::write(logs.join(format!("{n}.log.1")), "x").unwrap();
        }
        std::fs::write(logs.join("notes.txt"), "x").unwrap();
        std::fs::write(pod.join("logs/web.log"), "x").unwrap();
        let left = || {
            let mut v: Vec<String> =
                std::fs::read_dir(&logs).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            v.sort();
            v
        };
        prune_attempts(pod, "web", 3).await.unwrap();
        assert_eq!(left(), ["2.log", "2.log.1", "3.log", "3.log.1", "notes.txt"]);
        assert!(!pod.join("logs/web.log").exists());
        prune_attempts(pod, "web", 0).await.unwrap();
        assert_eq!(left(), ["notes.txt"]);
        // The directory is made when missing.
        prune_attempts(pod, "db", 0).await.unwrap();
        assert!(pod.join("logs/db").is_dir());
    }
}
