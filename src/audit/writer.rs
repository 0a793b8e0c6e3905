//! Writing the audit log: one thread takes records off the queue, seals each into the chain
//! and appends it to the file (or standard output), renaming the file to `FILE.1` (`.1` to
//! `.2`, …, up to the number kept) when the next line would take it past its size. Started on
//! an existing file, the chain goes on from its last record, or from the head kept outside it
//! (`head`) if the file lost records at its end: the first record written then says so.

use std::{
    fs::{File, OpenOptions},
    io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
};

use super::{
    chain::{self, Head},
    head::{self, KeptHead},
};
use crate::config::AuditOutput;

/// The most of a file's end read to find its last record.
const TAIL_BYTES: u64 = 1024 * 1024;

pub struct Writer {
    output: Output,
    head: Head,
    /// Where the head is kept outside the file, and the number of the record kept there last.
    kept: Option<(PathBuf, u64)>,
}

enum Output {
    Stdout,
    File {
        path: PathBuf,
        file: BufWriter<File>,
        written: u64,
        max_bytes: u64,
        keep: u32,
    },
}

impl Writer {
    /// Opens `output`; a file's head is kept at `kept` (see `head`). With the writer comes
    /// what its first record must say, if the file lost records since the head was kept.
    pub fn open(
        output: &AuditOutput,
        kept: Option<&Path>,
    ) -> std::io::Result<(Self, Option<String>)> {
        match output {
            AuditOutput::Stdout => Ok((
                Self {
                    output: Output::Stdout,
                    head: Head::default(),
                    kept: None,
                },
                None,
            )),
            AuditOutput::File {
                path,
                max_bytes,
                keep,
            } => {
                if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)?;
                }
                let mut head = last_head(path)?;
                let mut lost = None;
                if let Some(at) = kept
                    && let Some(saved) = head::read(at)?.filter(|saved| saved.names(path))
                    && (saved.seq > head.seq || (saved.seq == head.seq && saved.hash != head.hash))
                {
                    lost = Some(lost_record(&head, &saved));
                    tracing::error!(
                        log = %path.display(),
                        "{}: the audit log ends before where its chain was kept; it goes on \
                         from there, and `switchyard audit verify` will show the gap",
                        gap(&head, &saved)
                    );
                    head = Head {
                        seq: saved.seq,
                        hash: saved.hash,
                    };
                }
                let file = OpenOptions::new().create(true).append(true).open(path)?;
                let written = file.metadata()?.len();
                let file = BufWriter::new(file);
                let writer = Self {
                    output: Output::File {
                        path: path.clone(),
                        file,
                        written,
                        max_bytes: *max_bytes,
                        keep: *keep,
                    },
                    kept: kept.map(|at| (at.to_path_buf(), head.seq)),
                    head,
                };
                Ok((writer, lost))
            }
        }
    }

    /// Seals the record whose fields (without `seq`, `prev` and `hash`) are `fields` — a JSON
    /// object's text without its braces — and writes it.
    pub fn write(&mut self, fields: &str) -> std::io::Result<()> {
        let seq = self.head.seq + 1;
        let open = format!("{{\"seq\":{seq},{fields}");
        let mut line = chain::seal(&open, &mut self.head);
        self.head.seq = seq;
        line.push('\n');
        match &mut self.output {
            Output::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(line.as_bytes())?;
                out.flush()
            }
            Output::File {
                path,
                file,
                written,
                max_bytes,
                keep,
            } => {
                if *written > 0 && *written + line.len() as u64 > *max_bytes {
                    file.flush()?;
                    rotate(path, *keep)?;
                    *file =
                        BufWriter::new(OpenOptions::new().create(true).append(true).open(&*path)?);
                    *written = 0;
                }
                file.write_all(line.as_bytes())?;
                *written += line.len() as u64;
                Ok(())
            }
        }
    }

    /// The number of the last record written.
    pub fn seq(&self) -> u64 {
        self.head.seq
    }

    /// Hands what was written to the system (after each batch of records), and keeps the
    /// head where it is kept.
    pub fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.output {
            Output::Stdout => std::io::stdout().flush(),
            Output::File { file, path, .. } => {
                file.flush()?;
                if let Some((at, saved)) = &mut self.kept
                    && *saved != self.head.seq
                {
                    head::write(at, &KeptHead::of(path, &self.head))?;
                    *saved = self.head.seq;
                }
                Ok(())
            }
        }
    }

    /// Makes what was written durable (when the log closes).
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.flush()?;
        match &mut self.output {
            Output::Stdout => Ok(()),
            Output::File { file, .. } => file.get_ref().sync_data(),
        }
    }
}

/// What was lost: "records N+1…M" (cut from the end) or "record M" (replaced).
fn gap(found: &Head, saved: &KeptHead) -> String {
    if saved.seq > found.seq {
        format!(
            "records {}…{} are missing from its end",
            found.seq + 1,
            saved.seq
        )
    } else {
        format!("record {} is not the one written", saved.seq)
    }
}

/// The fields of the record that says what the file lost before this start.
fn lost_record(found: &Head, saved: &KeptHead) -> String {
    let detail = serde_json::Value::String(format!(
        "{} (the log ended at record {}; its kept head is record {})",
        gap(found, saved),
        found.seq,
        saved.seq
    ));
    format!(
        "\"kind\":\"audit\",\"principal\":\"switchyard\",\"outcome\":\"records_lost\",\"detail\":{detail}"
    )
}

/// `FILE` becomes `FILE.1`, `FILE.1` becomes `FILE.2`, …; the oldest past `keep` goes.
fn rotate(path: &Path, keep: u32) -> std::io::Result<()> {
    let numbered = |n: u32| PathBuf::from(format!("{}.{n}", path.display()));
    if keep == 0 {
        return std::fs::remove_file(path);
    }
    let _ = std::fs::remove_file(numbered(keep));
    for n in (1..keep).rev() {
        let from = numbered(n);
        if from.exists() {
            std::fs::rename(&from, numbered(n + 1))?;
        }
    }
    std::fs::rename(path, numbered(1))
}

/// Where the chain in `path` (or, if it is empty, in `path.1`) stands.
fn last_head(path: &Path) -> std::io::Result<Head> {
    for candidate in [
        path.to_path_buf(),
        PathBuf::from(format!("{}.1", path.display())),
    ] {
        if let Some(head) = tail_head(&candidate)? {
            return Ok(head);
        }
    }
    Ok(Head::default())
}

fn tail_head(path: &Path) -> std::io::Result<Option<Head>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))?;
    let mut last = None;
    for line in BufReader::new(file).lines() {
        let line = line?;
        if let Ok(link) = chain::link(&line) {
            last = Some(Head {
                seq: link.seq,
                hash: link.hash,
            });
        }
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reopened_log_goes_on_with_its_chain_through_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let output = AuditOutput::File {
            path: path.clone(),
            max_bytes: 4096,
            keep: 5,
        };
        let (mut writer, _) = Writer::open(&output, None).unwrap();
        for n in 0..3 {
            writer
                .write(&format!("\"kind\":\"test\",\"n\":{n}"))
                .unwrap();
        }
        writer.sync().unwrap();
        drop(writer);
        let (mut writer, _) = Writer::open(&output, None).unwrap();
        for n in 3..40 {
            writer
                .write(&format!("\"kind\":\"test\",\"n\":{n}"))
                .unwrap();
        }
        writer.flush().unwrap();
        let mut files: Vec<PathBuf> = (1..=5)
            .rev()
            .map(|n| PathBuf::from(format!("{}.{n}", path.display())))
            .filter(|path| path.exists())
            .collect();
        assert!(!files.is_empty(), "it rotated");
        files.push(path);
        let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        let verified = super::super::verify(&files, &Default::default()).unwrap();
        assert_eq!(verified.records, 40);
    }
}
