//! Sentence embeddings for tool search: a text becomes a unit vector whose dot product with
//! another's says how close their meanings are. The model is a BERT-style encoder read from a
//! local directory (the layout sentence-transformers exports: `config.json`, `vocab.txt`,
//! `model.safetensors`, and where the model needs them `1_Pooling/config.json` and the prompts
//! of `config_sentence_transformers.json`); its tokens are WordPiece's, and the sentence's
//! vector is its tokens' last hidden states pooled (their mean, unless the model says CLS).
//! Nothing is fetched: what is not in the directory is an error.

mod bert;
mod linear;
mod sentence;
mod wordpiece;

use std::path::{Path, PathBuf};

pub use bert::Config;
pub use sentence::{Pooling, Prompts};

/// The most tokens of a text that are encoded (the rest is cut off): enough for a tool's name
/// and the start of its description, and what bounds the cost of one text. A prompt's tokens
/// count among them.
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
    pooling: Pooling,
    prompts: Prompts,
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
        // sentence-transformers' own files: a directory may hold the model's alone.
        let read_optional = |file: &str| match std::fs::read_to_string(dir.join(file)) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            read => read
                .map(Some)
                .map_err(|error| fail(file)(error.to_string())),
        };
        let config: Config = serde_json::from_str(&read_text("config.json")?)
            .map_err(|error| fail("config.json")(error.to_string()))?;
        let pooling = match read_optional(POOLING)? {
            Some(text) => Pooling::parse(&text).map_err(fail(POOLING))?,
            None => Pooling::default(),
        };
        let prompts = match read_optional(SENTENCE_TRANSFORMERS)? {
            Some(text) => Prompts::parse(&text).map_err(fail(SENTENCE_TRANSFORMERS))?,
            None => Prompts::default(),
        };
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
        let encoder = Self {
            tokens,
            model,
            pooling,
            prompts,
        };
        Ok((encoder, inspected))
    }

    /// The length of the vectors.
    pub fn dimensions(&self) -> usize {
        self.model.hidden()
    }

    /// How it pools and prompts, where that is not the default (mean pooling, no prompts): a
    /// vector is bound to this as well as to the weights. Empty by default.
    pub fn variant(&self) -> String {
        let mut variant = String::new();
        if self.pooling != Pooling::default() {
            variant.push_str(&format!("pooling {:?}\n", self.pooling));
        }
        if self.prompts != Prompts::default() {
            variant.push_str(&format!("prompts {:?}\n", self.prompts));
        }
        variant
    }

    /// The unit vector of a query (after the model's query prompt).
    pub fn query(&self, text: &str) -> Vec<f32> {
        self.encode(&self.prompts.query, text)
    }

    /// The unit vector of a document, as a tool's text (after the model's document prompt).
    pub fn document(&self, text: &str) -> Vec<f32> {
        self.encode(&self.prompts.document, text)
    }

    fn encode(&self, prompt: &str, text: &str) -> Vec<f32> {
        let limit = MAX_TOKENS.min(self.model.max_positions());
        let ids = if prompt.is_empty() {
            self.tokens.encode(text, limit)
        } else {
            self.tokens.encode(&format!("{prompt}{text}"), limit)
        };
        self.model.sentence(&ids, self.pooling)
    }
}

/// Where sentence-transformers writes the pooling.
const POOLING: &str = "1_Pooling/config.json";
/// Where sentence-transformers writes the prompts.
const SENTENCE_TRANSFORMERS: &str = "config_sentence_transformers.json";

#[cfg(test)]
mod tests {
    use super::*;

    /// Loads a directory of `files` (name, text): the error, or "loaded".
    fn load(name: &str, files: &[(&str, &str)]) -> String {
        let dir =
            std::env::temp_dir().join(format!("switchyard-embed-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (file, text) in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let outcome = Encoder::load(&dir).map_or_else(
            |error| error.to_string().replace(&dir.display().to_string(), "DIR"),
            |_| "loaded".into(),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        outcome
    }

    #[test]
    fn the_sentence_transformers_files_are_read_where_there_are_some() {
        let config = r#"{"hidden_size": 2, "num_attention_heads": 1, "num_hidden_layers": 0,
            "intermediate_size": 1, "max_position_embeddings": 4, "vocab_size": 4}"#;
        let cls = r#"{"pooling_mode_cls_token": true}"#;
        let prompts = r#"{"prompts": {"query": "query: "}}"#;
        // Without them, or with them read, the next file wanted is the vocabulary.
        assert!(load("none", &[("config.json", config)]).starts_with("DIR/vocab.txt: "));
        let both = [
            ("config.json", config),
            (POOLING, cls),
            (SENTENCE_TRANSFORMERS, prompts),
        ];
        assert!(load("both", &both).starts_with("DIR/vocab.txt: "));
        let max = r#"{"pooling_mode_max_tokens": true}"#;
        let refused = load("max", &[("config.json", config), (POOLING, max)]);
        assert!(refused.starts_with("DIR/1_Pooling/config.json: its pooling is max_tokens"));
        let broken = load(
            "broken",
            &[("config.json", config), (SENTENCE_TRANSFORMERS, "[")],
        );
        assert!(broken.starts_with("DIR/config_sentence_transformers.json: "));
    }
}
