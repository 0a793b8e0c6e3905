//! What a model directory's sentence-transformers files say about making a sentence's vector:
//! the pooling of the last layer's token states (`1_Pooling/config.json`) and the prompts put
//! before a query and before a document (`config_sentence_transformers.json`). Both files are
//! optional: without them a sentence is the mean of its tokens, with no prompt.

use std::collections::HashMap;

use serde::Deserialize;

/// How the last layer's token states become the sentence's vector.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of every token's state (all-MiniLM-L6-v2, e5).
    #[default]
    Mean,
    /// The first token's (`[CLS]`) state alone (bge, arctic-embed).
    Cls,
}

/// `1_Pooling/config.json`: one mode set to `true`.
#[derive(Deserialize)]
struct PoolingFile {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
    /// Whether a prompt's tokens count in the pooling (they do unless this is `false`).
    include_prompt: Option<bool>,
}

impl Pooling {
    /// The pooling a `1_Pooling/config.json` (its text) names: mean or CLS, and no other mode
    /// with it, over every token, the prompt's too.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: PoolingFile = serde_json::from_str(text).map_err(|error| error.to_string())?;
        if file.include_prompt == Some(false) {
            return Err("it leaves the prompt out of the pooling; that is not supported".into());
        }
        let modes = [
            ("cls_token", file.pooling_mode_cls_token),
            ("mean_tokens", file.pooling_mode_mean_tokens),
            ("max_tokens", file.pooling_mode_max_tokens),
            (
                "mean_sqrt_len_tokens",
                file.pooling_mode_mean_sqrt_len_tokens,
            ),
            ("weightedmean_tokens", file.pooling_mode_weightedmean_tokens),
            ("lasttoken", file.pooling_mode_lasttoken),
        ];
        let set: Vec<&str> = (modes.iter())
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect();
        match set[..] {
            ["cls_token"] => Ok(Self::Cls),
            ["mean_tokens"] => Ok(Self::Mean),
            [] => Err("it sets no pooling mode".into()),
            _ => Err(format!(
                "its pooling is {}; only `mean_tokens` or `cls_token` alone is supported",
                set.join(" and ")
            )),
        }
    }
}

/// The texts put before a query's and a document's (a tool's) own, as the model was trained
/// with: e5's `query: ` and `passage: `, bge's retrieval instruction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompts {
    pub query: String,
    pub document: String,
}

/// `config_sentence_transformers.json`: prompts by name, and the one used when none is named.
#[derive(Deserialize)]
struct SentenceTransformersFile {
    #[serde(default)]
    prompts: HashMap<String, String>,
    #[serde(default)]
    default_prompt_name: Option<String>,
}

impl Prompts {
    /// The prompts of a `config_sentence_transformers.json` (its text): the one named `query`,
    /// and the one named `document` or `passage`; where there is none, the default prompt, if
    /// any.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: SentenceTransformersFile =
            serde_json::from_str(text).map_err(|error| error.to_string())?;
        let named = |names: &[&str]| {
            (names.iter())
                .chain(&file.default_prompt_name.as_deref())
                .find_map(|name| file.prompts.get(*name))
                .cloned()
                .unwrap_or_default()
        };
        Ok(Self {
            query: named(&["query"]),
            document: named(&["document", "passage"]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_is_mean_or_cls_alone() {
        let file = |modes: &str| format!(r#"{{"word_embedding_dimension": 384, {modes}}}"#);
        let mean = file(r#""pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true"#);
        assert_eq!(Pooling::parse(&mean), Ok(Pooling::Mean));
        let cls = file(r#""pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false"#);
        assert_eq!(Pooling::parse(&cls), Ok(Pooling::Cls));
        let max = file(r#""pooling_mode_max_tokens": true"#);
        assert!(Pooling::parse(&max).unwrap_err().contains("max_tokens"));
        let both = file(r#""pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true"#);
        assert!(Pooling::parse(&both).is_err());
        assert!(Pooling::parse(&file(r#""include_prompt": true"#)).is_err());
        let without_prompt = file(r#""pooling_mode_mean_tokens": true, "include_prompt": false"#);
        assert!(Pooling::parse(&without_prompt).is_err());
        assert!(Pooling::parse("not json").is_err());
    }

    #[test]
    fn prompts_are_read_by_their_names() {
        let e5 = r#"{"prompts": {"query": "query: ", "passage": "passage: "}}"#;
        assert_eq!(
            Prompts::parse(e5),
            Ok(Prompts {
                query: "query: ".into(),
                document: "passage: ".into(),
            })
        );
        // A retrieval instruction for queries only, documents as they are.
        let bge = r#"{"prompts": {"query": "Represent this: "}, "default_prompt_name": null}"#;
        let prompts = Prompts::parse(bge).unwrap();
        assert_eq!(
            (&*prompts.query, &*prompts.document),
            ("Represent this: ", "")
        );
        // The default prompt stands in for a missing one.
        let default =
            r#"{"prompts": {"query": "q: ", "text": "t: "}, "default_prompt_name": "text"}"#;
        let prompts = Prompts::parse(default).unwrap();
        assert_eq!((&*prompts.query, &*prompts.document), ("q: ", "t: "));
        assert_eq!(Prompts::parse(r#"{"prompts": {}}"#), Ok(Prompts::default()));
        assert_eq!(Prompts::parse("{}"), Ok(Prompts::default()));
    }
}
