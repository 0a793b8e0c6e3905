//! The sentence encoder tool search ranks by meaning with (`[catalog] search_model`), loaded
//! once per directory, and the tools' vectors it made, kept by the hash of their text so that
//! a text is embedded once (`catalog::semantic` ranks with them). The vectors can be written
//! out and read back (`to_bytes`, `restore`), so that a restart does not make them again; they
//! are bound to the model's weights by their digest. A tool's vector is kept a byte per
//! number (`vector`).

mod vector;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicBool, Ordering},
    },
};

use aws_lc_rs::digest::{Context, SHA256, digest};

use switchyard_embed::Encoder;

pub use vector::ToolVector;

/// A loaded sentence encoder, and the tools' vectors it made.
pub struct SearchModel {
    path: PathBuf,
    encoder: Encoder,
    /// The first 16 hex digits of the SHA-256 of its weights (and of how it pools and prompts,
    /// where that is not the default): what its vectors are bound to.
    identity: String,
    /// Vectors by the hash of the text they were made from.
    known: Mutex<HashMap<u64, ToolVector>>,
    /// Vectors were made or forgotten since they were last written out.
    unsaved: AtomicBool,
    /// The vectors written out before were read back (or there were none).
    restored: AtomicBool,
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
        let model = Arc::new(Self::load(dir)?);
        loaded.push((key, Arc::downgrade(&model)));
        Ok(model)
    }

    /// The model in `dir`, loaded now: an instance of its own, which `open` does not share.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let (encoder, mut digest) = Encoder::load_inspecting(dir, |weights| {
            let mut digest = Context::new(&SHA256);
            digest.update(weights);
            digest
        })
        .map_err(|error| error.to_string())?;
        digest.update(encoder.variant().as_bytes());
        let identity = hex(&digest.finish().as_ref()[..8]);
        Ok(Self {
            path: dir.to_owned(),
            encoder,
            identity,
            known: Mutex::default(),
            unsaved: AtomicBool::new(false),
            restored: AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The vector of a query.
    pub fn query(&self, text: &str) -> Vec<f32> {
        self.encoder.query(text)
    }

    /// The vector of a tool's `text`, made now unless it was made before, and the key it is
    /// kept by.
    pub fn tool(&self, text: &str) -> (u64, ToolVector) {
        let key = hash(text);
        if let Some(vector) = self.known().get(&key) {
            return (key, vector.clone());
        }
        let vector = ToolVector::new(&self.encoder.document(text));
        self.known().insert(key, vector.clone());
        self.unsaved.store(true, Ordering::Relaxed);
        (key, vector)
    }

    /// Forgets the vectors of texts not in `current` (tools that are gone, or changed).
    pub fn keep_only(&self, current: &HashSet<u64>) {
        let mut known = self.known();
        let before = known.len();
        known.retain(|key, _| current.contains(key));
        if known.len() != before {
            self.unsaved.store(true, Ordering::Relaxed);
        }
    }

    /// The name of the file its vectors are written to: bound to its weights.
    pub fn vectors_file(&self) -> String {
        format!("search-vectors-{}.bin", self.identity)
    }

    /// Whether vectors were made or forgotten since this was last asked (then they should be
    /// written out).
    pub fn take_unsaved(&self) -> bool {
        self.unsaved.swap(false, Ordering::Relaxed)
    }

    /// True once: the caller reads back the vectors written out before (`restore`).
    pub fn claim_restore(&self) -> bool {
        !self.restored.swap(true, Ordering::Relaxed)
    }

    /// Its vectors as bytes: `MAGIC`, the dimensions (u32), then per vector its text's key
    /// (u64), its scale (f32) and its numbers (i8), all little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        let known = self.known();
        let dimensions = self.encoder.dimensions();
        let mut bytes = Vec::with_capacity(MAGIC.len() + 4 + known.len() * (12 + dimensions));
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(dimensions as u32).to_le_bytes());
        for (key, vector) in known.iter() {
            bytes.extend_from_slice(&key.to_le_bytes());
            bytes.extend_from_slice(&vector.scale.to_le_bytes());
            bytes.extend(vector.numbers.iter().map(|number| number.to_le_bytes()[0]));
        }
        bytes
    }

    /// Takes the vectors of `bytes` (from `to_bytes` of a model with the same weights, or of
    /// an earlier version, which wrote each number as an f32: they are then unsaved, to be
    /// written again in a quarter of the space): how many; an error, and nothing taken, if
    /// they are not such bytes.
    pub fn restore(&self, bytes: &[u8]) -> Result<usize, String> {
        let dimensions = self.encoder.dimensions();
        let (body, earlier) = match (bytes.strip_prefix(MAGIC), bytes.strip_prefix(MAGIC_F32)) {
            (Some(body), _) => (body, false),
            (None, Some(body)) => (body, true),
            (None, None) => return Err("not a file of search vectors".into()),
        };
        let (size, read): (_, fn(&[u8]) -> ToolVector) = if earlier {
            (8 + 4 * dimensions, read_f32)
        } else {
            (12 + dimensions, read_scaled)
        };
        let (stated, records) = body.split_at_checked(4).ok_or("it is cut short")?;
        let stated = u32::from_le_bytes(stated.try_into().unwrap_or_default()) as usize;
        if stated != dimensions || records.len() % size != 0 {
            return Err(format!(
                "its vectors are not {dimensions} numbers each, or it is cut short"
            ));
        }
        let restored: Vec<(u64, ToolVector)> = records
            .chunks_exact(size)
            .map(|record| {
                let (key, vector) = record.split_at(8);
                let key = u64::from_le_bytes(key.try_into().unwrap_or_default());
                (key, read(vector))
            })
            .collect();
        let count = restored.len();
        self.known().extend(restored);
        if earlier && count > 0 {
            self.unsaved.store(true, Ordering::Relaxed);
        }
        Ok(count)
    }

    /// How many tools' vectors the model holds.
    pub fn known_count(&self) -> usize {
        self.known().len()
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<u64, ToolVector>> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What a vectors file begins with.
const MAGIC: &[u8] = b"switchyard search vectors 2\n";
/// What a file of an earlier version began with: its numbers were f32s.
const MAGIC_F32: &[u8] = b"switchyard search vectors 1\n";

/// A vector written as its scale (f32) and numbers (i8).
fn read_scaled(bytes: &[u8]) -> ToolVector {
    let (scale, numbers) = bytes.split_at(4);
    ToolVector {
        scale: f32::from_le_bytes(scale.try_into().unwrap_or_default()),
        numbers: numbers
            .iter()
            .map(|byte| i8::from_le_bytes([*byte]))
            .collect(),
    }
}

/// A vector written as f32s, scaled now.
fn read_f32(bytes: &[u8]) -> ToolVector {
    let numbers: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|n| f32::from_le_bytes([n[0], n[1], n[2], n[3]]))
        .collect();
    ToolVector::new(&numbers)
}

/// A text's key: the first 8 bytes of its SHA-256 (the same in every build, unlike `Hash`).
fn hash(text: &str) -> u64 {
    let digest = digest(&SHA256, text.as_bytes());
    u64::from_le_bytes(digest.as_ref()[..8].try_into().unwrap_or_default())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
