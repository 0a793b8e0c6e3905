//! Files only their owner may read (mode 0600, in directories of mode 0700), written whole:
//! the keys and tokens kept in the state directory.

use std::{
    fs,
    io::{self, Write},
    path::Path,
};

use base64::{Engine, engine::general_purpose::STANDARD};

/// Whether `write` may replace a file that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    Always,
    Never,
}

/// Writes `bytes` to `path` atomically: through a temporary file of a unique name in the same
/// directory (so concurrent writers never share one), synced, then renamed into place. With
/// `Replace::Never`, false if `path` already existed (it is left as it was).
pub fn write(path: &Path, bytes: &[u8], replace: Replace) -> io::Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_dir(dir)?;
    let mut builder = tempfile::Builder::new();
    builder.prefix(".tmp");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
    let mut file = builder.tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    let persisted = match replace {
        Replace::Always => file.persist(path),
        Replace::Never => file.persist_noclobber(path),
    };
    match persisted {
        Ok(_) => Ok(true),
        Err(error)
            if replace == Replace::Never && error.error.kind() == io::ErrorKind::AlreadyExists =>
        {
            Ok(false)
        }
        Err(error) => Err(error.error),
    }
}

/// Makes `dir` and its missing parents, new ones with mode 0700.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// The 32-byte key in `path` (base64), or a new random one written there; `what` names it in
/// the log line that tells it was made. Another process may make it at the same moment: the
/// file appears only whole and only if absent, and the one that finds it there already reads
/// that key back.
pub fn read_or_create_key(path: &Path, what: &str) -> io::Result<[u8; 32]> {
    match fs::read_to_string(path) {
        Ok(text) => decode_key(&text),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            let mut key = [0u8; 32];
            super::seal::fill_random(&mut key);
            let text = format!("{}\n", STANDARD.encode(key));
            if write(path, text.as_bytes(), Replace::Never)? {
                tracing::info!(path = %path.display(), "created {what}");
                return Ok(key);
            }
            decode_key(&fs::read_to_string(path)?)
        }
        Err(error) => Err(error),
    }
}

fn decode_key(text: &str) -> io::Result<[u8; 32]> {
    crate::config::decode_key(text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "does not hold a key (32 bytes in base64)",
        )
    })
}
