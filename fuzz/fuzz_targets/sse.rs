//! The event-stream reader of upstream answers and streams: any bytes, cut into any chunks,
//! give events or a clear "too large", never a panic; what a whole stream gives does not depend
//! on where it was cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard::wire::sse::{Event, Reader};

const MAX_EVENT: usize = 4096;

/// Every event of `chunks` fed in turn; `None` once one was too large.
fn read<'a>(chunks: impl Iterator<Item = &'a [u8]>) -> Option<Vec<Event>> {
    let mut reader = Reader::new(MAX_EVENT);
    let mut events = Vec::new();
    for chunk in chunks {
        reader.push(chunk);
        while let Some(event) = reader.next_event().ok()? {
            events.push(event);
        }
    }
    Some(events)
}

fuzz_target!(|input: (u8, &[u8])| {
    let (cut, bytes) = input;
    let whole = read(std::iter::once(bytes));
    let size = usize::from(cut).max(1);
    let pieces = read(bytes.chunks(size));
    if let (Some(whole), Some(pieces)) = (whole, pieces) {
        assert_eq!(whole, pieces, "cut every {size} bytes");
    }
});
