//! Where a routed request goes, found once: the name or URI in its params, looked up in what
//! the caller sees of the request's snapshot, and the upstream that owns it, found serving.
//! A tool call's arguments are checked against the tool's input schema here, so that on either
//! path (raw and typed, which forward to the target found here) an invalid call never leaves.

use std::sync::Arc;

use crate::{
    catalog::{self, ArgumentCheck, ArgumentError, NameScheme, ParamHeader, TaskSupport},
    error::GatewayError,
    protocol::Era,
    request::Request,
    upstream::Upstream,
    wire::{self, Fields},
};

/// Which routed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routed {
    Tool,
    Prompt,
    Resource,
}

impl Routed {
    /// The routed request `method` names, if it is one.
    pub fn of_method(method: &str) -> Option<Self> {
        match method {
            "tools/call" => Some(Routed::Tool),
            "prompts/get" => Some(Routed::Prompt),
            "resources/read" => Some(Routed::Resource),
            _ => None,
        }
    }

    pub fn method(self) -> &'static str {
        match self {
            Routed::Tool => "tools/call",
            Routed::Prompt => "prompts/get",
            Routed::Resource => "resources/read",
        }
    }

    /// The param that names what is asked for.
    pub fn field(self) -> &'static str {
        match self {
            Routed::Resource => "uri",
            Routed::Tool | Routed::Prompt => "name",
        }
    }
}

/// Where a routed request goes.
pub struct Target {
    pub kind: Routed,
    /// The owner, ready to serve when the target was found.
    pub upstream: Arc<Upstream>,
    /// The tool or prompt name, or the URI, as the upstream knows it.
    pub original: String,
    /// How the caller's view names things (to map URIs in the answer back).
    pub scheme: NameScheme,
    /// The `Mcp-Param-*` headers a tool's schema asks for.
    pub param_headers: Option<Arc<[ParamHeader]>>,
    /// Whether a tool runs as a task.
    pub task_support: TaskSupport,
}

/// Checks the arguments of tool call `request` (of tool `name`) against the tool's schema:
/// a call that breaks it never leaves the gateway. They are read whole only where a glance at
/// them cannot tell (see `catalog::arguments`).
fn check_arguments(
    request: &Request,
    check: &ArgumentCheck,
    name: &str,
) -> Result<(), GatewayError> {
    let arguments = request
        .message
        .params()
        .and_then(|params| params.get("arguments"));
    if check.passes_at_once(arguments) {
        return Ok(());
    }
    let parsed: Option<serde_json::Value> = match arguments {
        Some(raw) => Some(serde_json::from_str(raw.get()).map_err(|error| {
            GatewayError::InvalidParams(format!("`arguments` cannot be read: {error}"))
        })?),
        None => None,
    };
    check
        .check(parsed.as_ref())
        .map_err(|error| GatewayError::InvalidArguments {
            tool: name.to_owned(),
            problems: match error {
                ArgumentError::Invalid(problems) => problems,
                ArgumentError::TooCostly(why) => vec![format!("they cannot be checked: {why}")],
            },
        })
}

impl Target {
    /// The target of `request`, a routed request of `kind`: unknown names, and names the
    /// caller may not see, are the same error; an owner that cannot serve now says why.
    pub fn of(request: &Request, kind: Routed) -> Result<Self, GatewayError> {
        let field = kind.field();
        let name = request
            .message
            .params()
            .and_then(|params| params.get(field))
            .and_then(wire::string)
            .ok_or_else(|| GatewayError::InvalidParams(format!("`{field}` must be a string")))?;
        let (view, live) = (request.view(), &request.live);
        let mut check = None;
        let (owner, original, param_headers, task_support) = match kind {
            Routed::Tool => {
                let route = live.tool_route(view, &name)?;
                check = route.check.clone();
                (
                    route.route.upstream.clone(),
                    String::from(&*route.route.original),
                    route.param_headers.clone(),
                    route.task_support,
                )
            }
            Routed::Prompt => {
                let route = live.prompt_route(view, &name)?;
                let original = route.original.to_string();
                (
                    route.upstream.clone(),
                    original,
                    None,
                    TaskSupport::Forbidden,
                )
            }
            Routed::Resource => {
                let (owner, original, _) = live.resolve_uri(view, &name)?;
                (owner, original, None, TaskSupport::Forbidden)
            }
        };
        let upstream = live.serving_upstream(&owner)?;
        if let Some(check) = check.filter(|_| upstream.config().items.validate_arguments) {
            check_arguments(request, &check, &name)?;
        }
        Ok(Self {
            kind,
            upstream,
            original,
            scheme: view.scheme().clone(),
            param_headers,
            task_support,
        })
    }

    /// Whether the request can take the raw path: the upstream has one, and it needs no one
    /// to answer an `input_required` for a session client (see `raw`).
    pub fn takes_raw(&self, era: Era) -> bool {
        self.upstream.has_raw_path() && !(era == Era::Legacy && self.upstream.speaks_only_modern())
    }

    /// The `Mcp-Param-*` headers of a call of this tool with `params` (none for a tool whose
    /// schema asks for none).
    pub fn param_values(&self, params: &Fields) -> Vec<(http::HeaderName, http::HeaderValue)> {
        (self.param_headers.as_deref())
            .map(|annotated| catalog::header_values(annotated, params))
            .unwrap_or_default()
    }

    /// The tool, as the upstream knows it, for a tool call.
    pub fn tool(&self) -> Option<&str> {
        (self.kind == Routed::Tool).then_some(self.original.as_str())
    }
}
