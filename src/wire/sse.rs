//! Server-sent events on the wire: an incremental reader of an event stream that hands out each
//! event's data without copying it when it is one line (as JSON-RPC messages are), and the
//! writer of the events Switchyard sends.

use bytes::{Bytes, BytesMut};

/// One event of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: Bytes,
    /// How long a client should wait before reconnecting, in milliseconds.
    pub retry: Option<u64>,
}

impl Event {
    /// Whether the event carries a message (not only an id, a retry hint or a comment).
    pub fn has_data(&self) -> bool {
        !self.data.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an event of the stream is larger than {0} bytes")]
pub struct EventTooLarge(pub usize);

/// Reads events out of the chunks of a stream as they arrive. A chunk that holds whole events
/// (an answer's event, as a server writes it) is read where it is: its events' data are
/// slices of it. Only an event that spans chunks is gathered, and so copied.
pub struct Reader {
    unread: Unread,
    /// How far the unread bytes have been searched for the end of an event.
    searched: usize,
    max_event: usize,
}

/// What has arrived and is not read yet.
enum Unread {
    /// A chunk as it came (or what is left of it).
    Chunk(Bytes),
    /// The start of an event that spans chunks, gathered until it is complete.
    Gathering(BytesMut),
}

impl Reader {
    pub fn new(max_event: usize) -> Self {
        Self {
            unread: Unread::Chunk(Bytes::new()),
            searched: 0,
            max_event,
        }
    }

    /// Adds a copy of `chunk`, read as `push_chunk` reads chunks.
    pub fn push(&mut self, chunk: &[u8]) {
        self.push_chunk(Bytes::copy_from_slice(chunk));
    }

    /// Adds `chunk`; kept as it is when nothing is left unread before it.
    pub fn push_chunk(&mut self, chunk: Bytes) {
        match &mut self.unread {
            Unread::Chunk(unread) if unread.is_empty() => *unread = chunk,
            Unread::Gathering(unread) if unread.is_empty() => self.unread = Unread::Chunk(chunk),
            _ => self.gathering().extend_from_slice(&chunk),
        }
    }

    /// The unread bytes, moved (copied once) to where an event spanning chunks is gathered.
    fn gathering(&mut self) -> &mut BytesMut {
        if let Unread::Chunk(chunk) = &self.unread {
            self.unread = Unread::Gathering(BytesMut::from(&chunk[..]));
        }
        match &mut self.unread {
            Unread::Gathering(gathered) => gathered,
            Unread::Chunk(_) => unreachable!("moved to gathering just above"),
        }
    }

    /// The next complete event, if one has arrived.
    pub fn next_event(&mut self) -> Result<Option<Event>, EventTooLarge> {
        loop {
            let unread = match &self.unread {
                Unread::Chunk(chunk) => &chunk[..],
                Unread::Gathering(gathered) => &gathered[..],
            };
            let Some(end) = event_end(unread, &mut self.searched) else {
                if unread.len() > self.max_event {
                    return Err(EventTooLarge(self.max_event));
                }
                return Ok(None);
            };
            self.searched = 0;
            let block = match &mut self.unread {
                Unread::Chunk(chunk) => chunk.split_to(end),
                Unread::Gathering(gathered) => gathered.split_to(end).freeze(),
            };
            let event = parse_block(&block);
            // Blocks of only comments (keep-alives) are no events.
            if event.has_data()
                || event.id.is_some()
                || event.retry.is_some()
                || event.event.is_some()
            {
                return Ok(Some(event));
            }
        }
    }
}

/// Where the first complete event in `bytes` ends (after its blank line), if one has;
/// `searched` says how far an earlier call looked, and is moved on.
fn event_end(bytes: &[u8], searched: &mut usize) -> Option<usize> {
    let mut at = *searched;
    while let Some(offset) = memchr::memchr(b'\n', &bytes[at..]) {
        let newline = at + offset;
        let rest = &bytes[newline + 1..];
        if newline == 0 || rest.first() == Some(&b'\n') {
            return Some(newline + 1 + usize::from(newline != 0));
        }
        if rest.starts_with(b"\r\n") {
            return Some(newline + 3);
        }
        if rest.is_empty() || rest == b"\r" {
            // The blank line may still be on its way.
            *searched = newline;
            return None;
        }
        at = newline + 1;
    }
    *searched = bytes.len();
    None
}

fn parse_block(block: &Bytes) -> Event {
    let mut event = Event::default();
    let mut data: Option<(usize, usize)> = None;
    let mut joined: Option<Vec<u8>> = None;
    let mut start = 0;
    while start < block.len() {
        let end = memchr::memchr(b'\n', &block[start..]).map_or(block.len(), |i| start + i);
        let mut line_end = end;
        if line_end > start && block[line_end - 1] == b'\r' {
            line_end -= 1;
        }
        let line = &block[start..line_end];
        let (name, value_start): (&[u8], usize) = match memchr::memchr(b':', line) {
            Some(0) => (b"", line.len()),
            Some(colon) => {
                let skip = usize::from(line.get(colon + 1) == Some(&b' '));
                (&line[..colon], colon + 1 + skip)
            }
            None => (line, line.len()),
        };
        let value = (start + value_start, line_end);
        match name {
            b"data" => match (&mut joined, data) {
                (Some(joined), _) => {
                    joined.push(b'\n');
                    joined.extend_from_slice(&block[value.0..value.1]);
                }
                (None, Some(first)) => {
                    let mut both = block[first.0..first.1].to_vec();
                    both.push(b'\n');
                    both.extend_from_slice(&block[value.0..value.1]);
                    joined = Some(both);
                }
                (None, None) => data = Some(value),
            },
            b"id" => event.id = Some(text(&block[value.0..value.1])),
            b"event" => event.event = Some(text(&block[value.0..value.1])),
            b"retry" => {
                event.retry = std::str::from_utf8(&block[value.0..value.1])
                    .ok()
                    .and_then(|text| text.parse().ok())
            }
            _ => {}
        }
        start = end + 1;
    }
    event.data = match (joined, data) {
        (Some(joined), _) => joined.into(),
        (None, Some((from, to))) => block.slice(from..to),
        (None, None) => Bytes::new(),
    };
    event
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One `message` event carrying `data` (a JSON-RPC message, so one line), with its id.
pub fn message_event(id: Option<&str>, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(message_event_len(id, data));
    write_message_event(&mut out, id, data);
    super::freeze(out)
}

/// The length of `message_event(id, data)` for data of one line, the least it can be.
pub fn message_event_len(id: Option<&str>, data: &[u8]) -> usize {
    // `id: ID\n`, `event: message\n`, `data: DATA\n` and the blank line: exact for data
    // without line breaks (JSON written compactly), each of which adds a `data: `.
    id.map_or(0, |id| id.len() + 5) + data.len() + 23
}

/// `message_event(id, data)`, written at the end of `out`.
pub fn write_message_event(out: &mut Vec<u8>, id: Option<&str>, data: &[u8]) {
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"event: message\n");
    // JSON written compactly has no line breaks (looked for with a vectorized search); one
    // that has gets a data line per line.
    let mut rest = data;
    loop {
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(end) => (&rest[..end], Some(&rest[end + 1..])),
            None => (rest, None),
        };
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.push(b'\n');
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    out.push(b'\n');
}

/// An event with only an id and a reconnection delay: it lets a client resume a stream from
/// its start.
pub fn priming_event(id: &str, retry_ms: u64) -> Bytes {
    let mut out = Vec::with_capacity(priming_event_len(id, retry_ms));
    write_priming_event(&mut out, id, retry_ms);
    super::freeze(out)
}

/// The length of `priming_event(id, retry_ms)`.
pub fn priming_event_len(id: &str, retry_ms: u64) -> usize {
    "id: \nretry: \ndata: \n\n".len() + id.len() + itoa::Buffer::new().format(retry_ms).len()
}

/// `priming_event(id, retry_ms)`, written at the end of `out`.
pub fn write_priming_event(out: &mut Vec<u8>, id: &str, retry_ms: u64) {
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\nretry: ");
    out.extend_from_slice(itoa::Buffer::new().format(retry_ms).as_bytes());
    out.extend_from_slice(b"\ndata: \n\n");
}

/// A comment line, which keeps an idle stream from being closed by proxies.
pub const KEEP_ALIVE: &[u8] = b":\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(chunks: &[&[u8]]) -> Vec<Event> {
        let mut reader = Reader::new(1 << 20);
        let mut events = Vec::new();
        for chunk in chunks {
            reader.push(chunk);
            while let Some(event) = reader.next_event().unwrap() {
                events.push(event);
            }
        }
        events
    }

    #[test]
    fn written_events_are_as_long_as_their_lengths_say() {
        for id in [None, Some(""), Some("7"), Some("18446744073709551615/3")] {
            let event = message_event(id, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
            assert_eq!(
                event.len(),
                message_event_len(id, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
            );
            let id = id.unwrap_or_default();
            for retry in [0, 7, 1_000, u64::MAX] {
                assert_eq!(priming_event(id, retry).len(), priming_event_len(id, retry));
            }
        }
        // A line break adds a data line: the length is then a floor.
        assert!(message_event(None, b"{\n}").len() > message_event_len(None, b"{\n}"));
    }

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let events = read_all(&[
            b"id: 1\nevent: message\nda",
            b"ta: {\"a\":1}\n",
            b"\n:keep-alive\n\ndata: two\r\n\r\n",
            b"id: 3\nretry: 500\n\n",
        ]);
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].id.as_deref(), Some("1"));
        assert_eq!(events[0].event.as_deref(), Some("message"));
        assert_eq!(&events[0].data[..], b"{\"a\":1}");
        assert_eq!(&events[1].data[..], b"two");
        assert_eq!(events[2].retry, Some(500));
        assert!(!events[2].has_data());
    }

    #[test]
    fn chunks_are_read_where_they_are_and_gathered_only_across_chunks() {
        let mut reader = Reader::new(1 << 20);
        let chunk = Bytes::from_static(b"data: {\"a\":1}\nid: 1\n\ndata: {\"b\"");
        reader.push_chunk(chunk.clone());
        let first = reader.next_event().unwrap().unwrap();
        assert_eq!(&first.data[..], b"{\"a\":1}");
        assert_eq!(first.id.as_deref(), Some("1"));
        // The data is a slice of the chunk, not a copy.
        let within = chunk.as_ptr_range();
        assert!(within.contains(&first.data.as_ptr()));
        assert_eq!(reader.next_event(), Ok(None));
        reader.push_chunk(Bytes::from_static(b":2}\n"));
        assert_eq!(reader.next_event(), Ok(None));
        reader.push_chunk(Bytes::from_static(b"\ndata: c\n\n"));
        let second = reader.next_event().unwrap().unwrap();
        assert_eq!(&second.data[..], b"{\"b\":2}");
        let third = reader.next_event().unwrap().unwrap();
        assert_eq!(&third.data[..], b"c");
        assert_eq!(reader.next_event(), Ok(None));
        // Once all is read, the next chunk is again read where it is.
        let again = Bytes::from_static(b"data: d\n\n");
        reader.push_chunk(again.clone());
        let fourth = reader.next_event().unwrap().unwrap();
        assert!(again.as_ptr_range().contains(&fourth.data.as_ptr()));
    }

    #[test]
    fn multi_line_data_is_joined_and_lines_without_space_read() {
        let events = read_all(&[b"data:a\ndata: b\ndata:c\n\n"]);
        assert_eq!(&events[0].data[..], b"a\nb\nc");
    }

    #[test]
    fn an_event_that_never_ends_is_refused_past_the_limit() {
        let mut reader = Reader::new(16);
        reader.push(b"data: 0123456789abcdef0123");
        assert_eq!(reader.next_event(), Err(EventTooLarge(16)));
    }

    #[test]
    fn written_events_read_back() {
        let mut bytes = message_event(Some("0/1"), b"{\"x\":\"y\"}").to_vec();
        bytes.extend_from_slice(&priming_event("0/0", 3000));
        bytes.extend_from_slice(KEEP_ALIVE);
        bytes.extend_from_slice(&message_event(None, b"line1\nline2"));
        let events = read_all(&[&bytes]);
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].id.as_deref(), Some("0/1"));
        assert_eq!(&events[0].data[..], b"{\"x\":\"y\"}");
        assert_eq!(events[1].retry, Some(3000));
        assert_eq!(&events[2].data[..], b"line1\nline2");
    }
}
