//! Sentence embeddings for tool search: a text becomes a unit vector whose dot product with
//! another's says how close their meanings are. The model is a BERT-style encoder read from a
//! local directory (the layout sentence-transformers exports: `config.json`, `vocab.txt`,
//! `model.safetensors`); its tokens are WordPiece's, and the sentence's vector is the mean of
//! its tokens' last hidden states. Nothing is fetched: what is not in the directory is an error.

mod bert;
mod wordpiece;

use std::path::{Path, PathBuf};

pub use bert::Config;

/// The most tokens of a text that are encoded (the rest is cut off): enough for a tool's name
/// and the start of its description, and what bounds the cost of one text.
pub const MAX_TOKENS: usize = 64;

/// Why a model directory could not be loaded.
#[derive(Debug)]
pub struct LoadError {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for LoadError {}

/// A loaded encoder.
pub struct Encoder {
    tokens: wordpiece::WordPiece,
    model: bert::Bert,
}

impl Encoder {
    /// Loads the model in `dir`.
    pub fn load(dir: &Path) -> Result<Self, LoadError> {
        Self::load_inspecting(dir, |_| ()).map(|(encoder, ())| encoder)
    }

    /// Loads the model in `dir`, and gives what `inspect` makes of its weights file's bytes
    /// (its digest, say), read once for both.
    pub fn load_inspecting<T>(
        dir: &Path,
        inspect: impl FnOnce(&[u8]) -> T,
    ) -> Result<(Self, T), LoadError> {
        let fail = |file: &str| {
            let path = dir.join(file);
            move |reason: String| LoadError { path, reason }
        };
        let read_text = |file: &str| {
            std::fs::read_to_string(dir.join(file)).map_err(|error| fail(file)(error.to_string()))
        };
        let config: Config = serde_json::from_str(&read_text("config.json")?)
            .map_err(|error| fail("config.json")(error.to_string()))?;
        let tokens =
            wordpiece::WordPiece::new(&read_text("vocab.txt")?).map_err(fail("vocab.txt"))?;
        let weights = std::fs::read(dir.join("model.safetensors"))
            .map_err(|error| fail("model.safetensors")(error.to_string()))?;
        let inspected = inspect(&weights);
        let model = bert::Bert::load(config, &weights).map_err(fail("model.safetensors"))?;
        if tokens.len() > model.vocabulary() {
            return Err(fail("vocab.txt")(format!(
                "it has {} tokens, the model's embeddings {}",
                tokens.len(),
                model.vocabulary()
            )));
        }
        Ok((Self { tokens, model }, inspected))
    }

    /// The length of the vectors.
    pub fn dimensions(&self) -> usize {
        self.model.hidden()
    }

    /// The unit vector of `text`.
    pub fn encode(&self, text: &str) -> Vec<f32> {
        let limit = MAX_TOKENS.min(self.model.max_positions());
        let ids = self.tokens.encode(text, limit);
        self.model.sentence(&ids)
    }
}
