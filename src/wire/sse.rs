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

/// Reads events out of the chunks of a stream as they arrive.
pub struct Reader {
    buffer: BytesMut,
    /// How far `buffer` has been searched for the end of an event.
    searched: usize,
    max_event: usize,
}

impl Reader {
    pub fn new(max_event: usize) -> Self {
        Self {
            buffer: BytesMut::new(),
            searched: 0,
            max_event,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next complete event, if one has arrived.
    pub fn next_event(&mut self) -> Result<Option<Event>, EventTooLarge> {
        loop {
            let Some(end) = self.event_end() else {
                if self.buffer.len() > self.max_event {
                    return Err(EventTooLarge(self.max_event));
                }
                return Ok(None);
            };
            self.searched = 0;
            let block = self.buffer.split_to(end).freeze();
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

    /// Where the first complete event ends (after its blank line), if one has.
    fn event_end(&mut self) -> Option<usize> {
        let bytes = &self.buffer[..];
        let mut at = self.searched;
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
                self.searched = newline;
                return None;
            }
            at = newline + 1;
        }
        self.searched = bytes.len();
        None
    }
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
        let (name, value_start) = match memchr::memchr(b':', line) {
            Some(0) => ("", line.len()),
            Some(colon) => {
                let skip = usize::from(line.get(colon + 1) == Some(&b' '));
                (
                    std::str::from_utf8(&line[..colon]).unwrap_or(""),
                    colon + 1 + skip,
                )
            }
            None => (std::str::from_utf8(line).unwrap_or(""), line.len()),
        };
        let value = (start + value_start, line_end);
        match name {
            "data" => match (&mut joined, data) {
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
            "id" => event.id = Some(text(&block[value.0..value.1])),
            "event" => event.event = Some(text(&block[value.0..value.1])),
            "retry" => event.retry = text(&block[value.0..value.1]).parse().ok(),
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
    let id_len = id.map_or(0, |id| id.len() + 5);
    let mut out = Vec::with_capacity(data.len() + id_len + 24);
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"event: message\n");
    // JSON written compactly has no line breaks; one that has gets a data line per line.
    for line in data.split(|b| *b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.push(b'\n');
    }
    out.push(b'\n');
    super::freeze(out)
}

/// An event with only an id and a reconnection delay: it lets a client resume a stream from
/// its start.
pub fn priming_event(id: &str, retry_ms: u64) -> Bytes {
    let mut out = Vec::with_capacity(id.len() + 40);
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\nretry: ");
    out.extend_from_slice(itoa::Buffer::new().format(retry_ms).as_bytes());
    out.extend_from_slice(b"\ndata: \n\n");
    super::freeze(out)
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
