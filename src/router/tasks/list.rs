//! `tasks/list` (2025-11-25): the caller's tasks, merged across the upstreams that run tasks
//! one upstream page at a time, upstreams in config order, under Switchyard's task ids. The
//! cursor names the upstream and its own cursor there, sealed for the caller. On a connection
//! all clients share, only the tasks the caller created through it are theirs.

use bytes::Bytes;
use serde_json::Value;

use super::handle::{TaskHandle, TaskScope};
use crate::{
    error::GatewayError,
    names::UpstreamName,
    protocol::Era,
    router::{
        Call, ConnectionSource,
        raw::{RawRequest, Rewrite},
        timeout::Timer,
    },
    store::Sealer,
    upstream::Answer,
    wire,
};

impl<S: ConnectionSource> Call<'_, S> {
    /// `tasks/list`: the caller's tasks, one upstream page at a time, upstreams in config
    /// order. On a connection shared by every client, only the tasks the caller created
    /// through it are theirs.
    pub(super) async fn list_tasks(&self) -> Result<Bytes, GatewayError> {
        let cursor = self
            .request
            .message
            .params()
            .and_then(|params| params.get("cursor"))
            .filter(|cursor| cursor.get() != "null")
            .map(|cursor| {
                wire::string(cursor)
                    .and_then(|text| ListCursor::open(self.store.sealer(), &text, self.owner()))
                    .ok_or_else(|| GatewayError::InvalidParams("invalid cursor".into()))
            })
            .transpose()?;
        let view = self.request.view();
        let upstreams = view.task_upstreams(Era::Legacy);
        let (start, mut upstream_cursor) = match &cursor {
            Some(cursor) => (
                upstreams
                    .iter()
                    .position(|name| *name == cursor.upstream)
                    .ok_or_else(|| GatewayError::InvalidParams("invalid cursor".into()))?,
                cursor.cursor.clone(),
            ),
            None => (0, None),
        };
        let mut tasks = Vec::new();
        let mut next = None;
        for (at, name) in upstreams.iter().enumerate().skip(start) {
            let Ok(upstream) = self.request.live.serving_upstream(name) else {
                upstream_cursor = None;
                continue;
            };
            let params = match upstream_cursor.take() {
                Some(cursor) => serde_json::json!({ "cursor": cursor }).to_string(),
                None => "{}".to_owned(),
            };
            let write = |number: i64, _: Rewrite<'_>| -> Bytes {
                let id = itoa::Buffer::new().format(number).to_owned();
                wire::write::request(&id, "tasks/list", Some(params.as_bytes())).into()
            };
            let request = RawRequest {
                upstream: &upstream,
                method: "tasks/list",
                name: "",
                write: &write,
                params: &[],
                task: None,
            };
            let mut timer = Timer::start(&upstream, None);
            let _admitted = self.admit(&upstream, &mut timer).await?;
            let (answer, connection) = self.exchange(&request, &[], &mut timer).await?;
            if answer.is_error {
                // An upstream without `tasks/list` has no tasks to show.
                continue;
            }
            let page = upstream_page(&answer)?;
            let relay = connection.relay();
            let scope = TaskScope::of(&connection);
            for mut task in page.tasks {
                let Some(id) = task
                    .get("taskId")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                else {
                    continue;
                };
                // Without sessions, every caller's tasks are in one list: the store says whose.
                let theirs = match scope {
                    TaskScope::Server => {
                        let owner = self.store.task_owner(name.as_str(), &id).await;
                        owner.as_deref() == Some(self.owner())
                    }
                    _ => {
                        relay.is_per_session()
                            || relay.tasks.owner(&id).as_deref() == Some(self.owner())
                    }
                };
                if !theirs {
                    continue;
                }
                let handle = TaskHandle {
                    upstream: name.clone(),
                    scope: scope.clone(),
                    task: id,
                    owner: self.owner().to_owned(),
                };
                task["taskId"] = Value::String(handle.seal(self.store.sealer()));
                tasks.push(task);
            }
            let following = match page.next_cursor {
                Some(cursor) => Some((name.clone(), Some(cursor))),
                None => upstreams.get(at + 1).map(|name| (name.clone(), None)),
            };
            next = following.map(|(upstream, cursor)| {
                ListCursor { upstream, cursor }.seal(self.store.sealer(), self.owner())
            });
            break;
        }
        let mut result = serde_json::json!({ "tasks": tasks });
        if let Some(next) = next {
            result["nextCursor"] = Value::String(next);
        }
        if self.request.era == Era::Modern {
            result["resultType"] = Value::String("complete".into());
        }
        Ok(wire::write::response(
            self.request.id(),
            &result.to_string(),
        ))
    }
}

/// One page of an upstream's `tasks/list`.
struct UpstreamPage {
    tasks: Vec<Value>,
    next_cursor: Option<String>,
}

fn upstream_page(answer: &Answer) -> Result<UpstreamPage, GatewayError> {
    let result: Value = serde_json::from_str(answer.payload())
        .map_err(|error| GatewayError::Internal(format!("a task list cannot be read: {error}")))?;
    let tasks = match result.get("tasks") {
        Some(Value::Array(tasks)) => tasks.clone(),
        _ => Vec::new(),
    };
    let next_cursor = result
        .get("nextCursor")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(UpstreamPage { tasks, next_cursor })
}

/// Where a `tasks/list` goes on: which upstream, and its own cursor there.
struct ListCursor {
    upstream: UpstreamName,
    cursor: Option<String>,
}

impl ListCursor {
    const PURPOSE: &[u8] = b"task list cursor";

    fn seal(&self, sealer: &Sealer, owner: &str) -> String {
        use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
        let plain = serde_json::json!([owner, self.upstream.as_str(), self.cursor]).to_string();
        URL_SAFE_NO_PAD.encode(sealer.seal(Self::PURPOSE, plain.as_bytes()))
    }

    fn open(sealer: &Sealer, text: &str, owner: &str) -> Option<Self> {
        use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
        let plain = sealer.open(Self::PURPOSE, &URL_SAFE_NO_PAD.decode(text).ok()?)?;
        let (sealed_owner, upstream, cursor): (String, String, Option<String>) =
            serde_json::from_slice(&plain).ok()?;
        (sealed_owner == owner).then_some(())?;
        Some(Self {
            upstream: UpstreamName::new(&upstream).ok()?,
            cursor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_cursor_goes_on_only_for_whom_it_was_made() {
        let sealer = Sealer::new(&[[5; 32]]);
        let cursor = ListCursor {
            upstream: UpstreamName::new("ev").unwrap(),
            cursor: Some("page-2".into()),
        }
        .seal(&sealer, "user:alice");
        let opened = ListCursor::open(&sealer, &cursor, "user:alice").unwrap();
        assert_eq!(
            (opened.upstream.as_str(), opened.cursor.as_deref()),
            ("ev", Some("page-2"))
        );
        assert!(ListCursor::open(&sealer, &cursor, "user:bob").is_none());
        assert!(ListCursor::open(&sealer, "page-2", "user:alice").is_none());
    }
}
