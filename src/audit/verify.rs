//! `switchyard audit verify FILE…`: checks that audit files (oldest first: `FILE.2 FILE.1
//! FILE`) are one unbroken chain, and names the first record that was altered, removed or
//! reordered. Where the files start is checked too (at record 1, or where the caller says
//! older files were deleted), and, where the head kept outside the log can be read
//! (`head`), where they end: records cut from the end, or a last record replaced.

use std::{
    io::{BufRead, BufReader},
    path::Path,
};

use super::{chain, head::KeptHead};

/// What a verification compares the files with beyond themselves.
#[derive(Debug, Default, Clone)]
pub struct Checks {
    /// The number of the first record the files hold (older files were deleted); `None`: 1.
    pub from: Option<u64>,
    /// The head kept outside the log, if it could be read.
    pub head: Option<KeptHead>,
}

/// What a verification found.
#[derive(Debug, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
    /// The numbers of the first and last record.
    pub first: u64,
    pub last: u64,
    /// The hash of the last record: where the chain stands.
    pub head: String,
    /// Records written after the kept head was last kept (the gateway stopped between writing
    /// them and keeping its head), if a head was compared.
    pub beyond_kept: Option<u64>,
}

impl Verified {
    /// What was verified, for a person: `kept_at`, where the head was looked for.
    pub fn report(&self, kept_at: &Path) -> String {
        let chain = format!(
            "{} records verified (records {}…{}): one unbroken chain, ending at {}",
            self.records, self.first, self.last, self.head
        );
        let end = match self.beyond_kept {
            Some(0) => format!("its end is the head kept in {}", kept_at.display()),
            Some(more) => format!(
                "its end is {more} records past the head kept in {} (written after it was \
                 last kept)",
                kept_at.display()
            ),
            None => format!(
                "no head is kept for it at {}: records cut from its end cannot be seen (give \
                 --head or --config)",
                kept_at.display()
            ),
        };
        format!("{chain}\n{end}")
    }
}

/// Checks `files` in order as one chain, and against `checks`.
pub fn verify(files: &[&Path], checks: &Checks) -> Result<Verified, String> {
    let mut previous: Option<(u64, String)> = None;
    let mut first = None;
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
            match &previous {
                Some((seq, hash)) if link.prev != *hash || link.seq != seq + 1 => {
                    return Err(format!(
                        "{at} (record {}): the chain breaks before it: {} (or reordered)",
                        link.seq,
                        missing_between(*seq, link.seq),
                    ));
                }
                Some(_) => {}
                None => starts(&at, &link, checks.from)?,
            }
            first.get_or_insert(link.seq);
            previous = Some((link.seq, link.hash));
            records += 1;
        }
    }
    let (last, hash) = previous.ok_or("no record to verify")?;
    let beyond_kept = match &checks.head {
        Some(kept) => Some(ends(last, &hash, kept)?),
        None => None,
    };
    Ok(Verified {
        records,
        first: first.unwrap_or(last),
        last,
        head: hash,
        beyond_kept,
    })
}

/// Checks the first record of the files: record 1 starting the chain, or the one `from` names.
fn starts(at: &str, link: &chain::Link, from: Option<u64>) -> Result<(), String> {
    match from {
        None if link.seq != 1 => Err(format!(
            "{at}: the files start at record {}: records 1…{} are not in them (give the older \
             files first, or --from {} if they were deleted)",
            link.seq,
            link.seq - 1,
            link.seq
        )),
        None if link.prev != chain::GENESIS => Err(format!(
            "{at} (record 1): the first record does not start the chain"
        )),
        Some(from) if link.seq != from => Err(format!(
            "{at}: the files start at record {} where --from says {from}",
            link.seq
        )),
        _ => Ok(()),
    }
}

/// Checks the last record, `last` with `hash`, against the kept head: the number of records
/// written after it was kept.
fn ends(last: u64, hash: &str, kept: &KeptHead) -> Result<u64, String> {
    if kept.seq > last {
        return Err(format!(
            "records {}…{} are missing from the end: the files end at record {last}, and the \
             head kept for {} is record {}",
            last + 1,
            kept.seq,
            kept.log.display(),
            kept.seq
        ));
    }
    if kept.seq == last && kept.hash != hash {
        return Err(format!(
            "record {last}, the last, is not the one written: its hash is not the kept head's"
        ));
    }
    Ok(last - kept.seq)
}

/// "records N…M are missing" between record `before` and record `after`.
fn missing_between(before: u64, after: u64) -> String {
    match after.checked_sub(before + 1) {
        Some(0) | None => format!("it does not follow record {before}, which comes before it"),
        Some(1) => format!("record {} is missing", before + 1),
        Some(_) => format!("records {}…{} are missing", before + 1, after - 1),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::audit::chain::Head;

    /// A log of `records` records at `dir/audit.log`, and the head it ends at.
    fn log(dir: &Path, records: u64) -> (PathBuf, Vec<String>, Head) {
        let mut head = Head::default();
        let lines: Vec<String> = (1..=records)
            .map(|seq| chain::seal(&format!("{{\"seq\":{seq},\"kind\":\"t\""), &mut head))
            .collect();
        head.seq = records;
        let path = dir.join("audit.log");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        (path, lines, head)
    }

    #[test]
    fn the_ends_of_the_chain_are_checked_too() {
        let dir = tempfile::tempdir().unwrap();
        let (path, lines, head) = log(dir.path(), 30);
        let kept = KeptHead::of(&path, &head);
        let checks = Checks {
            from: None,
            head: Some(kept.clone()),
        };
        let whole = verify(&[&path], &checks).unwrap();
        assert_eq!(
            (whole.records, whole.first, whole.last, whole.beyond_kept),
            (30, 1, 30, Some(0))
        );

        // Cut from the end: the file alone is a good chain; the kept head is not its end.
        std::fs::write(&path, lines[..25].join("\n") + "\n").unwrap();
        assert!(verify(&[&path], &Checks::default()).is_ok());
        let cut = verify(&[&path], &checks).unwrap_err();
        assert!(
            cut.contains("records 26…30 are missing from the end"),
            "{cut}"
        );

        // Cut from the start: said so, unless the caller says where the files start.
        std::fs::write(&path, lines[20..].join("\n") + "\n").unwrap();
        let start = verify(&[&path], &Checks::default()).unwrap_err();
        assert!(start.contains("start at record 21"), "{start}");
        assert!(start.contains("records 1…20"), "{start}");
        let from = Checks {
            from: Some(21),
            head: Some(kept),
        };
        assert_eq!(verify(&[&path], &from).unwrap().records, 10);

        // Cut from the middle: named.
        let mut middle = lines.clone();
        middle.drain(9..12);
        std::fs::write(&path, middle.join("\n") + "\n").unwrap();
        let gap = verify(&[&path], &Checks::default()).unwrap_err();
        assert!(gap.contains("records 10…12 are missing"), "{gap}");
    }
}
