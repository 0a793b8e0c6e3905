//! The raw path to a stdio upstream. The child's stdin and stdout are not handed to rmcp:
//! rmcp reads and writes one end of an in-process pipe, and two tasks carry whole lines
//! between that pipe and the child. So the gateway can write requests of its own (with ids rmcp
//! never uses) between rmcp's, and take their answers off the child's output before rmcp reads
//! the rest: rmcp would drop an answer to a request it did not send, and its model of a result
//! drops the fields it does not know. A request's progress (under its id as the token) is taken
//! off with it, in order, so that it reaches the client before the answer, as on an HTTP
//! request's own stream. Everything else the child writes (other notifications, its own
//! requests, answers to rmcp's requests) reaches rmcp as it came.
//!
//! Of a session-era connection, the child hears nothing of the gateway's own before rmcp's
//! `notifications/initialized`: a request written between rmcp's lines could otherwise overtake
//! it, and servers that add tools when the client's capabilities are known (server-everything's
//! elicitation and sampling tools) would list without them.
//!
//! When rmcp lets go of its end (the connection closes), the child's stdin is closed and the
//! child is given a few seconds to exit before it is killed.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use dashmap::DashMap;
use rmcp::model::ServerJsonRpcMessage;
use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream},
    process::Child,
    sync::mpsc,
};
use tokio_util::task::TaskTracker;

use crate::wire;

/// The largest line taken from a child (rmcp's limit on a message too); longer ones are
/// dropped whole.
const MAX_LINE: usize = 16 * 1024 * 1024;
/// How long a child whose stdin was closed has to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// What the pipe between rmcp and the carrying tasks holds.
const PIPE_BYTES: usize = 256 * 1024;

/// Where requests of the gateway's own reach a stdio child, and their answers come back.
pub struct Lines {
    to_child: mpsc::UnboundedSender<Out>,
    pending: Arc<Pending>,
}

/// The requests of the gateway's own waiting for their answers, until the upstream's output
/// ends; shared with the legacy SSE transport, whose stream brings answers the same way.
#[derive(Default)]
pub struct Pending {
    waiters: DashMap<i64, mpsc::UnboundedSender<Bytes>>,
    /// The upstream's output ended: nothing more will be answered.
    ended: AtomicBool,
}

impl Pending {
    pub fn end(&self) {
        self.ended.store(true, Ordering::Release);
        self.waiters.clear();
    }

    /// Waits for what concerns request `id`: its progress, then its answer.
    pub fn wait(self: &Arc<Self>, id: i64) -> Result<Waiting, Ended> {
        let (sender, lines) = mpsc::unbounded_channel();
        self.waiters.insert(id, sender);
        let waiting = Waiting {
            id,
            pending: self.clone(),
            lines,
        };
        if self.ended.load(Ordering::Acquire) {
            return Err(Ended);
        }
        Ok(waiting)
    }

    /// Hands `message` to the request it concerns, if one of the gateway's own waits for it;
    /// whether it was taken.
    pub fn deliver(&self, message: &[u8]) -> bool {
        if self.waiters.is_empty() {
            return false;
        }
        let Some((id, answer)) = concerns(message) else {
            return false;
        };
        let waiter = if answer {
            self.waiters.remove(&id).map(|(_, waiter)| waiter)
        } else {
            self.waiters.get(&id).map(|waiter| waiter.clone())
        };
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(Bytes::copy_from_slice(message));
                true
            }
            None => false,
        }
    }
}

/// The child's output ended before the answer came.
#[derive(Debug, Clone, Copy)]
pub struct Ended;

/// What the writing task is given.
enum Out {
    /// A line of rmcp's.
    Line(Bytes),
    /// rmcp's `notifications/initialized`: the gateway's own lines held until now follow it.
    Initialized(Bytes),
    /// A request of the gateway's own.
    Own(Bytes),
    /// rmcp let go of its end: the child is to exit.
    End,
}

/// A request written to the child, waiting for its answer; forgotten when dropped.
pub struct Waiting {
    id: i64,
    pending: Arc<Pending>,
    lines: mpsc::UnboundedReceiver<Bytes>,
}

impl Waiting {
    /// The next line the child wrote about the request: its progress, then its answer.
    pub async fn next(&mut self) -> Result<Bytes, Ended> {
        self.lines.recv().await.ok_or(Ended)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.pending.waiters.remove(&self.id);
    }
}

impl Lines {
    /// Writes request `body` (one JSON-RPC request of id `id`, without a line end) to the child.
    pub fn send(&self, id: i64, body: &Bytes) -> Result<Waiting, Ended> {
        let waiting = self.pending.wait(id)?;
        let mut line = Vec::with_capacity(body.len() + 1);
        line.extend_from_slice(body);
        line.push(b'\n');
        self.to_child
            .send(Out::Own(line.into()))
            .map_err(|_| Ended)?;
        Ok(waiting)
    }
}

/// Puts the carrying tasks (tracked by `tasks`) between `child` (spawned with piped stdin and
/// stdout) and rmcp: rmcp's end of the pipe, and the raw path. Requests the child asks to be
/// run as tasks go to rmcp's handler through `inject` (see `augmented`). With `handshake`, the
/// raw path's lines wait for rmcp's `notifications/initialized`.
pub fn tap(
    mut child: Child,
    tasks: &TaskTracker,
    inject: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    handshake: bool,
) -> std::io::Result<(DuplexStream, Lines)> {
    let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
        (Some(stdin), Some(stdout)) => (stdin, stdout),
        _ => {
            return Err(std::io::Error::other(
                "the process has no piped stdin and stdout",
            ));
        }
    };
    let (rmcp_end, carrier_end) = tokio::io::duplex(PIPE_BYTES);
    let (from_rmcp, mut to_rmcp) = tokio::io::split(carrier_end);
    let (to_child, mut outgoing) = mpsc::unbounded_channel();
    let pending: Arc<Pending> = Arc::default();

    // The child's output: answers to the gateway's requests to their waiters, the rest to rmcp.
    let waiters = pending.clone();
    tasks.spawn(async move {
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        while let Ok(Some(whole)) = read_line(&mut stdout, &mut line).await {
            if !whole {
                tracing::warn!(
                    "a stdio upstream wrote a line of more than {MAX_LINE} bytes; it was dropped"
                );
                continue;
            }
            if waiters.deliver(&line) {
                continue;
            }
            if let Some(lifted) = super::augmented::lift(&line) {
                let _ = inject.send(lifted);
                continue;
            }
            if to_rmcp.write_all(&line).await.is_err() {
                break;
            }
        }
        // The requests still waiting fail now; rmcp reads the end of the child's output as
        // the end of the session.
        waiters.end();
        let _ = to_rmcp.shutdown().await;
    });

    // What rmcp writes, line by line, to the writing task.
    let from_rmcp_lines = to_child.clone();
    tasks.spawn(async move {
        let mut from_rmcp = BufReader::new(from_rmcp);
        let mut line = Vec::new();
        let mut initialized = !handshake;
        while let Ok(Some(true)) = read_line(&mut from_rmcp, &mut line).await {
            let line = Bytes::copy_from_slice(&line);
            let out = if initialized || !is_initialized(&line) {
                Out::Line(line)
            } else {
                initialized = true;
                Out::Initialized(line)
            };
            if from_rmcp_lines.send(out).is_err() {
                return;
            }
        }
        let _ = from_rmcp_lines.send(Out::End);
    });

    // The child's input, whole lines from both; then its exit.
    tasks.spawn(async move {
        let mut stdin = stdin;
        let mut held: Option<Vec<Bytes>> = handshake.then(Vec::new);
        while let Some(out) = outgoing.recv().await {
            let written = match out {
                Out::Own(line) if held.is_some() => {
                    held.get_or_insert_default().push(line);
                    continue;
                }
                Out::Line(line) | Out::Own(line) => write_line(&mut stdin, &line).await,
                Out::Initialized(line) => {
                    let mut written = write_line(&mut stdin, &line).await;
                    for line in held.take().unwrap_or_default() {
                        if written.is_ok() {
                            written = write_line(&mut stdin, &line).await;
                        }
                    }
                    written
                }
                Out::End => break,
            };
            if written.is_err() {
                break;
            }
        }
        drop(stdin);
        if tokio::time::timeout(EXIT_GRACE, child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    });
    Ok((rmcp_end, Lines { to_child, pending }))
}

/// Writes one whole line to the child.
async fn write_line(stdin: &mut tokio::process::ChildStdin, line: &[u8]) -> std::io::Result<()> {
    stdin.write_all(line).await?;
    stdin.flush().await
}

/// Whether `line` is the client's `notifications/initialized`.
fn is_initialized(line: &[u8]) -> bool {
    matches!(
        wire::parse(line),
        Ok(wire::Message::Notification(notification))
            if notification.method == "notifications/initialized"
    )
}

/// The request `line` concerns, if it names one by an integer: an answer (result or error, and
/// then `true`), or progress under the request's id as its token.
fn concerns(line: &[u8]) -> Option<(i64, bool)> {
    let (id, answer) = match wire::parse(line).ok()? {
        wire::Message::Response { id, .. } => (id, true),
        wire::Message::Error { id, .. } => (id?, true),
        wire::Message::Notification(notification)
            if notification.method == "notifications/progress" =>
        {
            (
                wire::Fields::of(notification.params?)?.get("progressToken")?,
                false,
            )
        }
        _ => return None,
    };
    Some((id.get().parse().ok()?, answer))
}

/// Reads one line (with its end) into `line`. `Some(false)` if it was longer than `MAX_LINE`
/// (the rest of it is skipped), `None` at the end of input.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let mut whole = true;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok((!line.is_empty()).then_some(whole));
        }
        let (chunk, end) = match memchr::memchr(b'\n', available) {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        if whole && line.len() + chunk.len() <= MAX_LINE {
            line.extend_from_slice(chunk);
        } else {
            whole = false;
            line.clear();
        }
        let used = chunk.len();
        reader.consume(used);
        if end {
            return Ok(Some(whole));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through `cat`, which writes back what it reads: the order the child heard.
    async fn heard_by_cat(handshake: bool) -> Vec<String> {
        let child = tokio::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let tasks = TaskTracker::new();
        let (inject, _injected) = mpsc::unbounded_channel();
        let (rmcp_end, lines) = tap(child, &tasks, inject, handshake).unwrap();
        let (read, mut write) = tokio::io::split(rmcp_end);
        // The gateway's own request first, before rmcp has written anything.
        let _waiting = lines
            .send(
                7,
                &Bytes::from_static(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#),
            )
            .unwrap();
        tokio::task::yield_now().await;
        write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
        let mut read = BufReader::new(read);
        let mut heard = Vec::new();
        for _ in 0..3 {
            let mut line = String::new();
            read.read_line(&mut line).await.unwrap();
            heard.push(wire::parse(line.as_bytes()).map(method).unwrap());
        }
        heard
    }

    fn method(message: wire::Message<'_>) -> String {
        match message {
            wire::Message::Request(request) => request.method.to_owned(),
            wire::Message::Notification(notification) => notification.method.to_owned(),
            _ => "an answer".to_owned(),
        }
    }

    #[tokio::test]
    async fn the_gateways_own_requests_follow_the_handshake() {
        assert_eq!(
            heard_by_cat(true).await,
            ["initialize", "notifications/initialized", "tools/list"]
        );
        // Without a handshake (2026-07-28), nothing is held.
        assert_eq!(heard_by_cat(false).await[0], "tools/list");
    }

    #[test]
    fn answers_and_progress_name_their_request_by_an_integer() {
        assert_eq!(
            concerns(br#"{"jsonrpc":"2.0","id":4294967297,"result":{}}"#),
            Some((4294967297, true))
        );
        assert_eq!(
            concerns(br#"{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x"}}"#),
            Some((7, true))
        );
        assert_eq!(
            concerns(
                br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":9,"progress":1}}"#
            ),
            Some((9, false))
        );
        assert_eq!(concerns(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#), None);
        assert_eq!(
            concerns(br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#),
            None
        );
        assert_eq!(
            concerns(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#),
            None
        );
        assert_eq!(concerns(b"not json"), None);
    }
}
