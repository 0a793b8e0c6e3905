//! Where the audit chain stands, kept outside its file: the last record's number and hash,
//! written after each batch to a file of the state directory (`path_for`), and published as the
//! gauge `switchyard_audit_head_seq` (so a scraper outside the machine keeps it too). What the
//! log file alone cannot show, the kept head does: records cut from its end, or its last
//! record replaced. `audit verify` compares the files with it, and a gateway that starts on a
//! file shorter than its kept head goes on from the head, so that the cut stays visible in the
//! chain itself.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::chain::{Head, sha256_hex};

/// The kept head of one log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptHead {
    /// The log it is the head of (its path made absolute).
    pub log: PathBuf,
    pub seq: u64,
    pub hash: String,
}

impl KeptHead {
    pub fn of(log: &Path, head: &Head) -> Self {
        Self {
            log: absolute(log),
            seq: head.seq,
            hash: head.hash.clone(),
        }
    }

    /// Whether it is the head of `log`.
    pub fn names(&self, log: &Path) -> bool {
        self.log == absolute(log)
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Where the head of the log at `log` is kept, in the state directory `state_dir`.
pub fn path_for(state_dir: &Path, log: &Path) -> PathBuf {
    let digest = sha256_hex(absolute(log).as_os_str().as_encoded_bytes());
    state_dir
        .join("audit-heads")
        .join(format!("{}.json", &digest[..16]))
}

/// The head kept at `path`, if one is (and can be read).
pub fn read(path: &Path) -> std::io::Result<Option<KeptHead>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Keeps `head` at `path`, replacing what was there at once (a new file renamed over it),
/// readable by its owner only.
pub fn write(path: &Path, head: &KeptHead) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(&serde_json::to_vec(head).map_err(std::io::Error::other)?)?;
    file.as_file().sync_data()?;
    file.persist(path).map_err(|error| error.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_kept_per_log_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (dir.path().join("a.log"), dir.path().join("b.log"));
        assert_ne!(path_for(dir.path(), &one), path_for(dir.path(), &two));
        let kept = KeptHead::of(
            &one,
            &Head {
                seq: 7,
                hash: "ab".repeat(32),
            },
        );
        let at = path_for(dir.path(), &one);
        assert_eq!(read(&at).unwrap(), None);
        write(&at, &kept).unwrap();
        assert_eq!(read(&at).unwrap(), Some(kept.clone()));
        assert!(kept.names(&one) && !kept.names(&two));
    }
}
