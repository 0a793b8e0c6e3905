//! `switchyard audit verify FILE…`: checks that audit files (oldest first: `FILE.2 FILE.1
//! FILE`) are one unbroken chain, and names the first record that was altered, removed or
//! reordered.

use std::{
    io::{BufRead, BufReader},
    path::Path,
};

use super::chain;

/// What a verification found.
#[derive(Debug, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
    /// The hash of the last record: where the chain stands.
    pub head: String,
}

/// Checks `files` in order as one chain.
pub fn verify(files: &[&Path]) -> Result<Verified, String> {
    let mut previous: Option<(u64, String)> = None;
    let mut records = 0;
    for path in files {
        let file = std::fs::File::open(path)
            .map_err(|error| format!("{}: cannot be read: {error}", path.display()))?;
        for (index, line) in BufReader::new(file).lines().enumerate() {
            let at = format!("{} line {}", path.display(), index + 1);
            let line = line.map_err(|error| format!("{at}: cannot be read: {error}"))?;
            let link = chain::link(&line).map_err(|reason| format!("{at}: {reason}"))?;
            if !link.intact {
                return Err(format!(
                    "{at} (record {}): altered: its hash is not the hash of its contents",
                    link.seq
                ));
            }
            if let Some((seq, hash)) = &previous {
                if link.prev != *hash || link.seq != seq + 1 {
                    return Err(format!(
                        "{at} (record {}): the chain breaks before it: it follows record {} \
                         where record {} was (removed or reordered records)",
                        link.seq,
                        link.seq.saturating_sub(1),
                        seq
                    ));
                }
            } else if link.seq == 1 && link.prev != chain::GENESIS {
                return Err(format!(
                    "{at} (record 1): the first record does not start the chain"
                ));
            }
            previous = Some((link.seq, link.hash));
            records += 1;
        }
    }
    let head = previous
        .map(|(_, hash)| hash)
        .ok_or("no record to verify")?;
    Ok(Verified { records, head })
}
