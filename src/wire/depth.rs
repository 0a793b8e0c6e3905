//! How deeply a JSON text nests, found with one pass over its bytes (strings skipped), so a
//! request nested too deeply is refused before anything parses it.

/// Whether `json` nests arrays and objects more than `max` levels deep. Only structure is
/// looked at: an invalid text is left for the parser to refuse.
pub fn nested_deeper_than(json: &[u8], max: u32) -> bool {
    // No more brackets than `max` cannot nest deeper (most messages): they are counted with a
    // vectorized search, and the bytes are read one by one only past that.
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    if memchr::memchr2_iter(b'{', b'[', json)
        .take(limit.saturating_add(1))
        .count()
        <= limit
    {
        return false;
    }
    let mut depth = 0u32;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::nested_deeper_than;

    #[test]
    fn depth_counts_structure_not_strings() {
        assert!(!nested_deeper_than(br#"{"a":[1,{"b":2}]}"#, 3));
        assert!(nested_deeper_than(br#"{"a":[1,{"b":2}]}"#, 2));
        assert!(!nested_deeper_than(br#"{"a":"[[[[[[\"{{{{"}"#, 1));
        assert!(nested_deeper_than(&[b'['; 65], 64));
        assert!(!nested_deeper_than(b"", 1));
        // Past the count of brackets, strings are still told apart.
        assert!(!nested_deeper_than(br#"{"a":"[[[[","b":[{}]}"#, 3));
        assert!(nested_deeper_than(br#"{"a":"[[[[","b":[{"c":[]}]}"#, 3));
        assert!(!nested_deeper_than(br#"[][][][][][]"#, 1));
    }
}
