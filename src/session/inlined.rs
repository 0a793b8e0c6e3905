//! Inlining for clients that cannot follow links (LangChain's `outputHandling` with resources
//! as `content`): a tool result's `resource_link` blocks, and embedded resources that carry
//! only a URI, are read as the caller would read them — the same routing, policy and quotas
//! as its own `resources/read` — and put in the result as embedded resources, up to the
//! configured number of bytes for the whole result, and at most `MOST_LINKS` reads for one
//! result (an upstream cannot have one call turn into thousands of reads). What cannot be
//! read, or would go beyond that, stays a link.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::serve::Serving;
use crate::{downstream::Outlet, request::Request};

/// The most links of one result that are read.
const MOST_LINKS: usize = 32;

/// A tool result's links, found.
pub struct Links {
    answer: Value,
    /// Each link's place in `result.content`, and its URI.
    found: Vec<(usize, String)>,
    /// What each link is replaced with, by its place.
    inlined: Vec<(usize, Vec<Value>)>,
}

/// The links in `answer` (a tool call's JSON-RPC answer), if it has any.
pub fn links(answer: &[u8]) -> Option<Links> {
    let answer: Value = serde_json::from_slice(answer).ok()?;
    let content = answer.get("result")?.get("content")?.as_array()?;
    let found: Vec<(usize, String)> = (content.iter().enumerate())
        .filter_map(|(at, block)| Some((at, link_of(block)?.to_owned())))
        .take(MOST_LINKS)
        .collect();
    (!found.is_empty()).then_some(Links {
        answer,
        found,
        inlined: Vec::new(),
    })
}

/// The URI a block links to: a `resource_link`, or an embedded resource with neither text
/// nor blob.
fn link_of(block: &Value) -> Option<&str> {
    match block.get("type")?.as_str()? {
        "resource_link" => block.get("uri")?.as_str(),
        "resource" => {
            let resource = block.get("resource")?;
            let empty = resource.get("text").is_none() && resource.get("blob").is_none();
            empty.then(|| resource.get("uri")?.as_str()).flatten()
        }
        _ => None,
    }
}

impl Links {
    /// Each link's place and URI.
    pub fn found(&self) -> Vec<(usize, String)> {
        self.found.clone()
    }

    /// Replaces the link at `at` with `contents`, each an embedded resource.
    pub fn inline(&mut self, at: usize, contents: Vec<Value>) {
        let blocks = (contents.into_iter())
            .map(|resource| json!({ "type": "resource", "resource": resource }))
            .collect();
        self.inlined.push((at, blocks));
    }

    /// The answer with what was inlined in place; `None` if nothing was.
    pub fn finish(mut self) -> Option<Bytes> {
        if self.inlined.is_empty() {
            return None;
        }
        let content = self.answer.get_mut("result")?.get_mut("content")?;
        let blocks = std::mem::take(content.as_array_mut()?);
        let mut inlined = self.inlined.into_iter().peekable();
        let mut out = Vec::with_capacity(blocks.len());
        for (at, block) in blocks.into_iter().enumerate() {
            match inlined.next_if(|(place, _)| *place == at) {
                Some((_, replacement)) => out.extend(replacement),
                None => out.push(block),
            }
        }
        *content = Value::Array(out);
        serde_json::to_vec(&self.answer).ok().map(Bytes::from)
    }
}

/// A `resources/read` of `uri` by the caller of `outer` (its `_meta` but its progress token).
pub fn read_request(outer: &Request, uri: &str) -> Option<Request> {
    let mut params = Map::new();
    params.insert("uri".into(), json!(uri));
    if let Some(meta) = outer.message.meta() {
        let meta: Map<String, Value> = (meta.iter())
            .filter(|(key, _)| *key != "progressToken")
            .filter_map(|(key, value)| {
                Some((key.to_owned(), serde_json::from_str(value.get()).ok()?))
            })
            .collect();
        params.insert("_meta".into(), Value::Object(meta));
    }
    let params = Value::Object(params).to_string();
    Request::within(outer, "resources/read", params.as_bytes())
}

/// The contents a `resources/read` answered with, if they fit in `budget` bytes (which they
/// then use up).
pub fn contents(answer: &[u8], budget: &mut u64) -> Option<Vec<Value>> {
    let mut answer: Value = serde_json::from_slice(answer).ok()?;
    let contents = answer.get_mut("result")?.get_mut("contents")?.take();
    let Value::Array(contents) = contents else {
        return None;
    };
    let size: u64 = (contents.iter())
        .map(|content| {
            let text = |key| content.get(key).and_then(Value::as_str).map_or(0, str::len);
            (text("text") + text("blob")) as u64
        })
        .sum();
    if contents.is_empty() || size > *budget {
        return None;
    }
    *budget -= size;
    Some(contents)
}

impl Serving<'_> {
    /// A tool result with the resources it links to read (as this caller would read them)
    /// and inlined, up to `max` bytes in all.
    pub(super) async fn inline(&self, answer: Bytes, max: u64, outlet: &Outlet) -> Bytes {
        let Some(mut links) = links(&answer) else {
            return answer;
        };
        let mut budget = max;
        for (at, uri) in links.found() {
            let Some(read) = read_request(self.request, &uri) else {
                continue;
            };
            let read = Arc::new(read);
            let serving = Serving {
                request: &read,
                ..*self
            };
            let got = Box::pin(serving.answer(None, outlet.clone())).await;
            match contents(&got.message, &mut budget) {
                Some(contents) => links.inline(at, contents),
                None => tracing::debug!(%uri, "a linked resource is left a link"),
            }
        }
        links.finish().unwrap_or(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_found_and_replaced_in_place() {
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [
            {"type": "text", "text": "see"},
            {"type": "resource_link", "uri": "a+file:///x", "name": "x"},
            {"type": "resource", "resource": {"uri": "a+file:///y"}},
            {"type": "resource", "resource": {"uri": "a+file:///z", "text": "already"}},
        ]}});
        let mut links = links(answer.to_string().as_bytes()).unwrap();
        assert_eq!(
            links.found(),
            [(1, "a+file:///x".to_owned()), (2, "a+file:///y".to_owned())]
        );
        let read = json!({"result": {"contents": [{"uri": "a+file:///x", "text": "12345"}]}});
        let mut budget = 8;
        let got = contents(read.to_string().as_bytes(), &mut budget).unwrap();
        assert_eq!(budget, 3);
        assert!(
            contents(read.to_string().as_bytes(), &mut budget).is_none(),
            "beyond"
        );
        links.inline(1, got);
        let out: Value = serde_json::from_slice(&links.finish().unwrap()).unwrap();
        let content = out["result"]["content"].as_array().unwrap();
        assert_eq!(content.len(), 4);
        assert_eq!(content[1]["type"], "resource");
        assert_eq!(content[1]["resource"]["text"], "12345");
        assert_eq!(
            content[2]["resource"]["uri"], "a+file:///y",
            "left as it was"
        );
    }

    #[test]
    fn only_so_many_links_of_one_result_are_read() {
        let link = json!({"type": "resource_link", "uri": "a+file:///x", "name": "x"});
        let answer = json!({"result": {"content": vec![link; MOST_LINKS * 10]}});
        let links = links(answer.to_string().as_bytes()).unwrap();
        assert_eq!(links.found().len(), MOST_LINKS);
    }

    #[test]
    fn a_result_without_links_is_left_alone() {
        let answer = json!({"result": {"content": [{"type": "text", "text": "t"}]}});
        assert!(links(answer.to_string().as_bytes()).is_none());
        assert!(links(b"not json").is_none());
    }
}
