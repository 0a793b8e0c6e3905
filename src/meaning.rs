//! The sentence encoder tool search ranks by meaning with (`[catalog] search_model`), loaded
//! once per directory, and the tools' vectors it made, kept by the hash of their text so that
//! a text is embedded once (`catalog::semantic` ranks with them).

use std::{
    collections::{HashMap, HashSet},
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, Weak},
};

use switchyard_embed::Encoder;

/// A loaded sentence encoder, and the tools' vectors it made.
pub struct SearchModel {
    path: PathBuf,
    encoder: Encoder,
    /// Vectors by the hash of the text they were made from.
    known: Mutex<HashMap<u64, Arc<[f32]>>>,
}

impl std::fmt::Debug for SearchModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchModel")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The models loaded, by directory and the time their weights were written: a reload that names
/// the same unchanged directory keeps the model running, and what it embedded.
static LOADED: Mutex<Vec<(Loaded, Weak<SearchModel>)>> = Mutex::new(Vec::new());

type Loaded = (PathBuf, Option<std::time::SystemTime>);

impl SearchModel {
    /// The model in `dir`, loaded, or the one loaded from there already.
    pub fn open(dir: &Path) -> Result<Arc<Self>, String> {
        let written = std::fs::metadata(dir.join("model.safetensors"))
            .and_then(|metadata| metadata.modified())
            .ok();
        let key = (dir.to_owned(), written);
        let mut loaded = LOADED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        loaded.retain(|(_, model)| model.strong_count() > 0);
        if let Some(model) = loaded
            .iter()
            .find(|(loaded, _)| *loaded == key)
            .and_then(|(_, model)| model.upgrade())
        {
            return Ok(model);
        }
        let encoder = Encoder::load(dir).map_err(|error| error.to_string())?;
        let model = Arc::new(Self {
            path: dir.to_owned(),
            encoder,
            known: Mutex::default(),
        });
        loaded.push((key, Arc::downgrade(&model)));
        Ok(model)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The vector of a query.
    pub fn query(&self, text: &str) -> Vec<f32> {
        self.encoder.encode(text)
    }

    /// The vector of a tool's `text`, made now unless it was made before, and the key it is
    /// kept by.
    pub fn tool(&self, text: &str) -> (u64, Arc<[f32]>) {
        let key = hash(text);
        if let Some(vector) = self.known().get(&key) {
            return (key, vector.clone());
        }
        let vector: Arc<[f32]> = self.encoder.encode(text).into();
        self.known().insert(key, vector.clone());
        (key, vector)
    }

    /// Forgets the vectors of texts not in `current` (tools that are gone, or changed).
    pub fn keep_only(&self, current: &HashSet<u64>) {
        self.known().retain(|key, _| current.contains(key));
    }

    /// How many tools' vectors the model holds.
    pub fn known_count(&self) -> usize {
        self.known().len()
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<[f32]>>> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn hash(text: &str) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}
