//! The search model's vectors kept in the state directory (`search-vectors-DIGEST.bin`, bound
//! to the model's weights), so that a restart or an upgrade reads them back instead of making
//! them again: about 15 ms of CPU per tool.

use std::path::Path;

use crate::{
    meaning::SearchModel,
    store::private::{self, Replace},
};

/// Reads back the vectors written out before, once per model (nothing if there are none).
pub fn restore(model: &SearchModel, state_dir: &Path) {
    if !model.claim_restore() {
        return;
    }
    let path = state_dir.join(model.vectors_file());
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "the search vectors kept cannot be read; they are made again");
            return;
        }
    };
    match model.restore(&bytes) {
        Ok(count) => tracing::info!(path = %path.display(), count, "search vectors read back"),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "the search vectors kept are not usable; they are made again");
        }
    }
}

/// Writes the model's vectors out if they changed since they were last written.
pub fn save(model: &SearchModel, state_dir: &Path) {
    if !model.take_unsaved() {
        return;
    }
    let path = state_dir.join(model.vectors_file());
    if let Err(error) = private::write(&path, &model.to_bytes(), Replace::Always) {
        tracing::warn!(path = %path.display(), %error, "the search vectors were not kept");
    }
}
