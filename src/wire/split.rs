//! Splitting JSON text that is already known to be valid (a `RawValue`, which serde_json checked
//! when it was read) into an object's fields, by finding where each value ends rather than
//! parsing it again: a string ends at its first unescaped quote (found with a vectorized
//! search), an array or object where its brackets balance, anything else at the next
//! delimiter. Only the validity of the text is relied on; nothing is checked again.

use std::borrow::Cow;

use serde_json::value::RawValue;

/// Hands each field of the JSON object `value` to `field`, in order, its value a slice of
/// `value`; `None` if `value` is not an object.
pub fn object_fields<'a>(
    value: &'a RawValue,
    mut field: impl FnMut(Cow<'a, str>, &'a RawValue),
) -> Option<()> {
    let text = value.get();
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_space(bytes, at);
        match bytes.get(at)? {
            b'}' => return Some(()),
            b',' => at = skip_space(bytes, at + 1),
            _ => {}
        }
        let key_end = string_end(bytes, at)?;
        let key = super::string(raw(&text[at..key_end]))?;
        // After the key, its colon.
        at = skip_space(bytes, key_end) + 1;
        at = skip_space(bytes, at);
        let end = value_end(bytes, at)?;
        field(key, raw(&text[at..end]));
        at = end;
    }
}

/// Where JSON whitespace from `at` ends.
fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// Just past the string that starts (with its quote) at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut from = at + 1;
    loop {
        let found = from + memchr::memchr2(b'"', b'\\', bytes.get(from..)?)?;
        if bytes[found] == b'"' {
            return Some(found + 1);
        }
        // An escape: the character after the backslash is never the string's end.
        from = found + 2;
    }
}

/// Just past the value that starts at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        // A number, `true`, `false` or `null`: up to the next delimiter or the end.
        _ => Some(
            bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(bytes.len(), |length| at + length),
        ),
    }
}

/// `text`, a whole JSON value cut out of a `RawValue` along value boundaries, as a `RawValue`.
fn raw(text: &str) -> &RawValue {
    // SAFETY: `RawValue` is `#[repr(transparent)]` over `str` (serde_json turns its own `&str`
    // into `&RawValue` the same way), so the two references have the same layout; the test
    // `a_raw_value_is_its_text` checks it. What `RawValue` promises, that its text is one
    // valid JSON value, holds: `text` is one whole value of valid JSON.
    unsafe { &*(std::ptr::from_ref::<str>(text) as *const RawValue) }
}

#[cfg(test)]
mod tests;
