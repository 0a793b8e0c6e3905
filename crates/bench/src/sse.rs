//! An incremental Server-Sent Events parser for MCP response streams: it turns body chunks into
//! the `data` of each complete event, whatever the chunk boundaries and line endings (LF, CRLF,
//! CR). Comments (keep-alives) and events without data (priming events) yield nothing.

/// The state between chunks: the line being read and the event being built.
#[derive(Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The last byte seen was a CR, so an LF right after it ends no new line.
    after_cr: bool,
}

impl SseParser {
    /// Feeds `chunk`, calling `on_event` with the data of each event it completes, until
    /// `on_event` returns true (found what it wanted); then returns true at once. The parser is
    /// then left mid-chunk and must not be fed again.
    pub fn push(&mut self, chunk: &[u8], mut on_event: impl FnMut(&[u8]) -> bool) -> bool {
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    if self.end_line(&mut on_event) {
                        return true;
                    }
                }
                _ => self.line.push(byte),
            }
        }
        false
    }

    /// Handles one complete line; true if it completed the event `on_event` wanted.
    fn end_line(&mut self, on_event: &mut impl FnMut(&[u8]) -> bool) -> bool {
        if self.line.is_empty() {
            let found = self.has_data && on_event(&self.data);
            self.data.clear();
            self.has_data = false;
            return found;
        }
        let line = &self.line[..];
        if line.first() != Some(&b':') {
            let (field, value) = match line.iter().position(|&b| b == b':') {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            if field == b"data" {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                // An empty `data:` (a priming event) is no message.
                self.has_data = !self.data.is_empty();
            }
        }
        self.line.clear();
        false
    }
}

#[cfg(test)]
mod tests {
    use super::SseParser;

    fn events(chunks: &[&str]) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut seen = Vec::new();
        for chunk in chunks {
            parser.push(chunk.as_bytes(), |data| {
                seen.push(String::from_utf8_lossy(data).into_owned());
                false
            });
        }
        seen
    }

    #[test]
    fn skips_priming_events_and_comments() {
        let stream = "id: 0\nretry: 3000\ndata:\n\n: keep-alive\n\nevent: message\nid: 1\n\
                      data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
        assert_eq!(
            events(&[stream]),
            [r#"{"jsonrpc":"2.0","id":7,"result":{}}"#]
        );
    }

    #[test]
    fn events_survive_any_chunking_and_line_ending() {
        let stream = "data: {\"a\":\r\ndata: 1}\r\n\r\ndata:x\r\rdata: y\n\n";
        let whole = events(&[stream]);
        assert_eq!(whole, ["{\"a\":\n1}", "x", "y"]);
        for split in 0..stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(events(&[a, b]), whole, "split at {split}");
        }
        let bytes: Vec<String> = stream.chars().map(String::from).collect();
        let bytes: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(events(&bytes), whole);
    }

    #[test]
    fn stops_at_the_event_wanted() {
        let mut parser = SseParser::default();
        let mut seen = 0;
        let found = parser.push(b"data: 1\n\ndata: 2\n\ndata: 3\n\n", |data| {
            seen += 1;
            data == b"2"
        });
        assert!(found);
        assert_eq!(seen, 2);
    }

    #[test]
    fn an_unfinished_event_is_not_dispatched() {
        assert!(events(&["data: {\"partial\":"]).is_empty());
    }
}
