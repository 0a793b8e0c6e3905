//! The hash chain of the audit log. Each record is one line of JSON ending in two fields: `prev`,
//! the hash of the record before it (zeros before the first record ever), and `hash`, the
//! SHA-256 (hex) of the line up to `,"hash"`. A rotated file goes on from the last hash of the
//! one before it, so the files of a log are one chain. Changing a byte of a record breaks its
//! own hash; removing or reordering records breaks `prev` (and the `seq` numbers).

use std::fmt::Write as _;

/// The `prev` of the first record ever.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

const HASH_FIELD: &str = ",\"hash\":\"";

/// Where a chain stands: the last record's number and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: String,
}

impl Default for Head {
    fn default() -> Self {
        Self {
            seq: 0,
            hash: GENESIS.to_owned(),
        }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest.as_ref() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// The line of a record whose fields (a JSON object's text, without its closing brace) are
/// `open`, chained after `head`: `head` moves on to it.
pub fn seal(open: &str, head: &mut Head) -> String {
    let mut line = String::with_capacity(open.len() + 160);
    line.push_str(open);
    line.push_str(",\"prev\":\"");
    line.push_str(&head.hash);
    line.push('"');
    let hash = sha256_hex(line.as_bytes());
    line.push_str(HASH_FIELD);
    line.push_str(&hash);
    line.push_str("\"}");
    head.hash = hash;
    line
}

/// What a line holds of the chain: its number, its `prev`, its own hash, and whether that
/// hash is the hash of the line.
pub struct Link {
    pub seq: u64,
    pub prev: String,
    pub hash: String,
    pub intact: bool,
}

/// Reads `line` as a record of the chain, or says why it is not one.
pub fn link(line: &str) -> Result<Link, String> {
    let at = line
        .rfind(HASH_FIELD)
        .ok_or("it has no `hash` field at its end")?;
    let (body, tail) = line.split_at(at);
    let hash = tail[HASH_FIELD.len()..]
        .strip_suffix("\"}")
        .ok_or("it does not end with its hash")?
        .to_owned();
    let record: serde_json::Value = serde_json::from_str(&format!("{body}}}"))
        .map_err(|error| format!("it is not a JSON record: {error}"))?;
    let seq = record["seq"].as_u64().ok_or("it has no `seq`")?;
    let prev = record["prev"]
        .as_str()
        .ok_or("it has no `prev`")?
        .to_owned();
    Ok(Link {
        seq,
        prev,
        intact: sha256_hex(body.as_bytes()) == hash,
        hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_line_reads_back_intact_and_chained() {
        let mut head = Head::default();
        let first = seal(r#"{"seq":1,"kind":"x""#, &mut head);
        let second = seal(r#"{"seq":2,"kind":"y""#, &mut head);
        let one = link(&first).unwrap();
        let two = link(&second).unwrap();
        assert!(one.intact && two.intact);
        assert_eq!(one.prev, GENESIS);
        assert_eq!(two.prev, one.hash);
        assert_eq!(head.hash, two.hash);
        let altered = first.replace("\"x\"", "\"z\"");
        assert!(!link(&altered).unwrap().intact);
        assert!(serde_json::from_str::<serde_json::Value>(&first).is_ok());
    }
}
