//! Pinned tool definitions: a defence against an upstream that changes a tool after users came
//! to trust it (a new description that instructs the model, a schema that asks for more).
//!
//! For a pinned upstream, the first definition seen of each tool is recorded as approved, in
//! the store (so replicas agree, and restarts keep it). A later definition that differs in
//! what a model or a user reads (title, description, input and output schema, annotations)
//! is held: the approved one goes on being served (or the tool is hidden, by
//! `[catalog] pin_changed`), the change is logged, counted and shown to operators with a diff,
//! and it is served only once an operator approves it. With `[catalog] pin_new = "hold"`, a
//! tool never seen before waits for approval too.

mod record;

use std::{collections::HashMap, sync::Arc};

use arc_swap::ArcSwap;
use dashmap::DashMap;
use serde::Serialize;
use serde_json::Value;

use record::{Record, pinned_part};

use crate::{
    catalog::{ListedTool, UpstreamCatalog},
    clock::unix_seconds,
    config::{CatalogSettings, PinChanged, PinNew},
    events::Events,
    metrics::Metrics,
    store::{PIN_KIND, Store, StoreError},
};

/// A change (or a new tool) waiting for an operator, as the admin API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Held {
    pub upstream: String,
    pub tool: String,
    /// `changed` (an approved tool's definition changed) or `new` (never approved).
    pub kind: &'static str,
    /// Since when it waits (Unix seconds).
    pub since: u64,
    pub approved: Option<Value>,
    pub pending: Value,
    /// What changed, as a unified diff of the read parts of the two definitions.
    pub diff: String,
}

/// How pinning goes, from `[catalog]`.
#[derive(Debug, Clone, Copy)]
struct Settings {
    pin: bool,
    new: PinNew,
    changed: PinChanged,
}

/// The pinned definitions, and what waits for approval.
pub struct Pins {
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    settings: ArcSwap<Settings>,
    /// The records, where the store keeps none (the memory store): this process's only.
    local: DashMap<String, HashMap<String, Record>>,
    /// What waits for approval, by upstream, as last settled.
    held: DashMap<String, Vec<Held>>,
    /// Where what starts waiting, and what is approved, is told to operators.
    operators: Arc<Events>,
}

/// Why an approval could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    #[error("nothing of `{0}` waits for approval")]
    NothingHeld(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Pins {
    pub fn new(
        store: Arc<Store>,
        metrics: Arc<Metrics>,
        catalog: &CatalogSettings,
        operators: Arc<Events>,
    ) -> Self {
        Self {
            store,
            metrics,
            settings: ArcSwap::from_pointee(settings_of(catalog)),
            local: DashMap::new(),
            held: DashMap::new(),
            operators,
        }
    }

    /// Takes up `[catalog]`'s pinning settings (at a reload).
    pub fn configure(&self, catalog: &CatalogSettings) {
        self.settings.store(Arc::new(settings_of(catalog)));
    }

    /// Whether an upstream that says `pin` (or nothing) is pinned.
    pub fn applies(&self, pin: Option<bool>) -> bool {
        pin.unwrap_or(self.settings.load().pin)
    }

    /// What of `discovered` (`upstream`'s lists) is served: with pinning, each tool as
    /// approved, and nothing of what is not; without, all of it.
    pub async fn settle(
        &self,
        upstream: &str,
        pin: Option<bool>,
        mut discovered: UpstreamCatalog,
    ) -> Result<UpstreamCatalog, StoreError> {
        if !self.applies(pin) {
            self.hold(upstream, Vec::new());
            return Ok(discovered);
        }
        let mut settings = **self.settings.load();
        let mut records = self.records(upstream).await?;
        if records.is_empty() {
            // An upstream pinned for the first time is trusted as it is; what it adds later
            // is new.
            settings.new = PinNew::Approve;
        }
        let mut held = Vec::new();
        let mut served = Vec::with_capacity(discovered.tools.len());
        for tool in std::mem::take(&mut discovered.tools) {
            let name = tool.name.to_string();
            let definition = serde_json::to_value(&tool).unwrap_or_default();
            let record = match records.remove(&name) {
                Some(record) => record,
                None => {
                    if settings.new == PinNew::Hold {
                        tracing::warn!(
                            upstream, tool = %name,
                            "a pinned upstream lists a new tool; it waits for an operator's approval"
                        );
                    }
                    let record = Record::first(&name, &definition, settings.new);
                    if self.write(upstream, &name, &record, false).await? {
                        record
                    } else {
                        // Another replica recorded it first: its record stands.
                        self.records(upstream)
                            .await?
                            .remove(&name)
                            .unwrap_or(record)
                    }
                }
            };
            let (updated, outcome) = record.seeing(&definition);
            if outcome.is_new_change() {
                self.metrics
                    .tool_changes
                    .with_label_values(&[upstream])
                    .inc();
                tracing::warn!(
                    upstream, tool = %name,
                    "a pinned tool's definition changed; the change is held until an operator approves it"
                );
            }
            if let Some(updated) = &updated {
                self.write(upstream, &name, updated, true).await?;
            }
            if let Some(waiting) = updated.as_ref().unwrap_or(&record).held(upstream) {
                held.push(waiting);
            }
            match outcome.serve(settings.changed) {
                Serve::Current => served.push(tool),
                Serve::Approved(approved) => match ListedTool::from_value(approved) {
                    Ok(approved) => served.push(approved),
                    Err(error) => tracing::warn!(
                        upstream, tool = %name, %error,
                        "the approved definition of a pinned tool cannot be read; the tool is hidden"
                    ),
                },
                Serve::Nothing => {}
            }
        }
        discovered.tools = served;
        self.hold(upstream, held);
        Ok(discovered)
    }

    /// Makes `held` what waits of `upstream`; operators are told of tools that start waiting.
    fn hold(&self, upstream: &str, held: Vec<Held>) {
        let before = if held.is_empty() {
            self.held.remove(upstream).map(|(_, held)| held)
        } else {
            self.held.insert(upstream.to_owned(), held.clone())
        };
        let waited = |tool: &Held| {
            (before.iter().flatten())
                .any(|old| old.tool == tool.tool && old.pending == tool.pending)
        };
        let new: Vec<&str> = (held.iter())
            .filter(|tool| !waited(tool))
            .map(|tool| tool.tool.as_str())
            .collect();
        if !new.is_empty() {
            let event = serde_json::json!({ "upstream": upstream, "tools": new });
            self.operators.publish("held", &event);
        }
    }

    /// Everything that waits for approval, upstream by upstream.
    pub fn held(&self) -> Vec<Held> {
        let mut all: Vec<Held> = self
            .held
            .iter()
            .flat_map(|entry| entry.value().clone())
            .collect();
        all.sort_by(|a, b| (&a.upstream, &a.tool).cmp(&(&b.upstream, &b.tool)));
        all
    }

    /// How many of `upstream`'s tools wait for approval.
    pub fn held_count(&self, upstream: &str) -> usize {
        self.held.get(upstream).map_or(0, |held| held.len())
    }

    /// Approves what waits of `upstream`: tool `tool`, or all of them. The names approved.
    pub async fn approve(
        &self,
        upstream: &str,
        tool: Option<&str>,
    ) -> Result<Vec<String>, ApproveError> {
        let records = self.records(upstream).await?;
        let mut approved = Vec::new();
        for (name, record) in records {
            if tool.is_some_and(|tool| tool != name) {
                continue;
            }
            if let Some(record) = record.approving() {
                self.write(upstream, &name, &record, true).await?;
                tracing::info!(upstream, tool = %name, "a pinned tool's definition was approved");
                approved.push(name);
            }
        }
        if approved.is_empty() {
            let what = match tool {
                Some(tool) => format!("{upstream}/{tool}"),
                None => upstream.to_owned(),
            };
            return Err(ApproveError::NothingHeld(what));
        }
        approved.sort();
        let event = serde_json::json!({ "upstream": upstream, "tools": approved });
        self.operators.publish("approved", &event);
        if let Err(error) = self.store.announce(PIN_KIND, upstream).await {
            tracing::warn!(%error, "cannot tell the other replicas of an approval; they see it at their next discovery");
        }
        Ok(approved)
    }

    async fn records(&self, upstream: &str) -> Result<HashMap<String, Record>, StoreError> {
        if !self.store.keeps_pins() {
            return Ok(self
                .local
                .get(upstream)
                .map(|records| records.clone())
                .unwrap_or_default());
        }
        let mut records = HashMap::new();
        for plain in self.store.pins(upstream).await? {
            match serde_json::from_slice::<Record>(&plain) {
                Ok(record) => {
                    records.insert(record.tool.clone(), record);
                }
                Err(error) => {
                    return Err(StoreError::Unreadable {
                        kind: PIN_KIND,
                        reason: error.to_string(),
                    });
                }
            }
        }
        Ok(records)
    }

    async fn write(
        &self,
        upstream: &str,
        tool: &str,
        record: &Record,
        replace: bool,
    ) -> Result<bool, StoreError> {
        if !self.store.keeps_pins() {
            let mut records = self.local.entry(upstream.to_owned()).or_default();
            if !replace && records.contains_key(tool) {
                return Ok(false);
            }
            records.insert(tool.to_owned(), record.clone());
            return Ok(true);
        }
        let plain = serde_json::to_vec(record).unwrap_or_default();
        self.store.put_pin(upstream, tool, &plain, replace).await
    }
}

/// What is served of a pinned tool.
enum Serve {
    Current,
    Approved(Value),
    Nothing,
}

fn settings_of(catalog: &CatalogSettings) -> Settings {
    Settings {
        pin: catalog.pin,
        new: catalog.pin_new,
        changed: catalog.pin_changed,
    }
}

/// A unified diff of the read parts of `approved` and `pending`.
fn diff(approved: Option<&Value>, pending: &Value) -> String {
    let pretty = |value: Option<&Value>| {
        value
            .map(|value| {
                serde_json::to_string_pretty(&pinned_part(value)).unwrap_or_default() + "\n"
            })
            .unwrap_or_default()
    };
    let (before, after) = (pretty(approved), pretty(Some(pending)));
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .header("approved", "pending")
        .to_string()
}

fn now() -> u64 {
    unix_seconds(std::time::SystemTime::now())
}
