//! The 2026-07-28 multi-round tools of the conformance fixture: they answer `input_required`
//! with the client requests they need, and complete when retried with the answers. Their state
//! travels in `requestState`, sealed with an HMAC so that a tampered value is refused.

// The input requests are sampling, elicitation and roots, deprecated by SEP-2577 but still used.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
        CreateMessageRequest, CreateMessageRequestParams, ElicitRequest, ElicitRequestParams,
        ElicitationSchema, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
        InputRequest, InputRequests, InputRequiredResult, ListRootsRequest, PromptMessage,
        RequestStateCodec, Role, SamplingMessage, SealOptions, Tool,
    },
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const ELICITATION: &str = "test_input_required_result_elicitation";
const SAMPLING: &str = "test_input_required_result_sampling";
const LIST_ROOTS: &str = "test_input_required_result_list_roots";
const REQUEST_STATE: &str = "test_input_required_result_request_state";
const MULTIPLE: &str = "test_input_required_result_multiple_inputs";
const MULTI_ROUND: &str = "test_input_required_result_multi_round";
const TAMPERED: &str = "test_input_required_result_tampered_state";
const CAPABILITIES: &str = "test_input_required_result_capabilities";
const STREAMING: &str = "test_streaming_elicitation";
/// The multi-round prompt.
pub const PROMPT: &str = "test_input_required_result_prompt";

const TOOLS: [(&str, &str); 9] = [
    (
        ELICITATION,
        "Asks for the user's name with an input request",
    ),
    (SAMPLING, "Asks the client to sample with an input request"),
    (
        LIST_ROOTS,
        "Asks for the client's roots with an input request",
    ),
    (
        REQUEST_STATE,
        "Asks for confirmation, keeping state in requestState",
    ),
    (MULTIPLE, "Asks for several inputs at once"),
    (MULTI_ROUND, "Asks for inputs over two rounds"),
    (TAMPERED, "Refuses a requestState that was altered"),
    (
        CAPABILITIES,
        "Asks only for what the client declared it can answer",
    ),
    (
        STREAMING,
        "Asks for the user's name without a server-to-client request",
    ),
];

/// The state a round leaves for the next; sealed into `requestState`.
#[derive(Serialize, Deserialize, Default)]
struct State {
    round: u32,
    name: Option<String>,
}

pub fn is_mrtr_tool(name: &str) -> bool {
    TOOLS.iter().any(|(tool, _)| *tool == name)
}

pub fn tools() -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|(name, description)| {
            let Value::Object(schema) = json!({"type": "object", "properties": {}}) else {
                unreachable!()
            };
            Tool::new(*name, *description, schema)
        })
        .collect()
}

/// One round of a multi-round tool.
pub fn call(
    codec: &Arc<RequestStateCodec>,
    params: &CallToolRequestParams,
    capabilities: &ClientCapabilities,
) -> Result<CallToolResponse, ErrorData> {
    let name = params.name.as_ref();
    let responses = params.input_responses.as_ref();
    let state = open_state(codec, name, params.request_state.as_deref())?;
    let answer = |key: &str| responses.and_then(|r| r.get(key));
    let done = |text: String| Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into());
    match name {
        ELICITATION | STREAMING => match answer("user_name").and_then(accepted_name) {
            Some(name) => done(format!("Hello, {name}!")),
            None => ask(
                codec,
                name,
                [("user_name", ask_name("What is your name?"))],
                None,
            ),
        },
        SAMPLING => match answer("capital_question").and_then(sampled_text) {
            Some(text) => done(format!("Answer: {text}")),
            None => ask(
                codec,
                name,
                [("capital_question", sample("What is the capital of France?"))],
                None,
            ),
        },
        LIST_ROOTS => match answer("client_roots") {
            Some(roots) if roots.get("roots").is_some() => {
                done(format!("Roots: {}", roots["roots"]))
            }
            _ => ask(codec, name, [("client_roots", list_roots())], None),
        },
        REQUEST_STATE | TAMPERED => match (state.round, answer("confirm").and_then(confirmed)) {
            (1, Some(true)) => done("state-ok: confirmed".into()),
            _ => ask(
                codec,
                name,
                [("confirm", ask_confirmation())],
                Some(State {
                    round: 1,
                    name: None,
                }),
            ),
        },
        MULTIPLE => {
            let answered = ["ask_name", "ask_model", "list_roots"]
                .iter()
                .all(|k| answer(k).is_some());
            if state.round == 1 && answered {
                return done("All three inputs received".into());
            }
            let requests = [
                ("ask_name", ask_name("What is your name?")),
                ("ask_model", sample("Say hello")),
                ("list_roots", list_roots()),
            ];
            ask(
                codec,
                name,
                requests,
                Some(State {
                    round: 1,
                    name: None,
                }),
            )
        }
        MULTI_ROUND => match state.round {
            1 => match answer("step1").and_then(accepted_name) {
                Some(user) => ask(
                    codec,
                    name,
                    [(
                        "step2",
                        ask_field("color", "What is your favourite colour?"),
                    )],
                    Some(State {
                        round: 2,
                        name: Some(user),
                    }),
                ),
                None => ask(
                    codec,
                    name,
                    [("step1", ask_name("What is your name?"))],
                    Some(state),
                ),
            },
            2 => match answer("step2").and_then(|a| accepted_field(a, "color")) {
                Some(color) => done(format!(
                    "{} likes {color}",
                    state.name.as_deref().unwrap_or("someone")
                )),
                None => ask(
                    codec,
                    name,
                    [(
                        "step2",
                        ask_field("color", "What is your favourite colour?"),
                    )],
                    Some(state),
                ),
            },
            _ => ask(
                codec,
                name,
                [("step1", ask_name("What is your name?"))],
                Some(State {
                    round: 1,
                    name: None,
                }),
            ),
        },
        CAPABILITIES => {
            if let Some(answer) = responses.and_then(|r| r.values().next()) {
                return done(format!("Received {answer}"));
            }
            let request = if capabilities.elicitation.is_some() {
                ask_name("What is your name?")
            } else if capabilities.sampling.is_some() {
                sample("Say hello")
            } else if capabilities.roots.is_some() {
                list_roots()
            } else {
                return Err(ErrorData::missing_required_client_capability(
                    sampling_capability(),
                ));
            };
            ask(codec, name, [("input", request)], None)
        }
        other => Err(ErrorData::invalid_params(
            format!("unknown tool `{other}`"),
            None,
        )),
    }
}

/// The multi-round prompt: asks for a name, then greets whoever answered. On the legacy
/// protocol, which has no input requests, it completes at once.
pub fn get_prompt(params: &GetPromptRequestParams, modern: bool) -> GetPromptResponse {
    let answer = params
        .input_responses
        .as_ref()
        .and_then(|responses| responses.values().next());
    match (answer, modern) {
        (Some(answer), _) => {
            let name = accepted_name(answer).unwrap_or_else(|| "the user".into());
            GetPromptResponse::Complete(GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                format!("Greet {name} warmly."),
            )]))
        }
        (None, false) => {
            GetPromptResponse::Complete(GetPromptResult::new(vec![PromptMessage::new_text(
                Role::User,
                "Greet the user warmly.",
            )]))
        }
        (None, true) => GetPromptResponse::InputRequired(InputRequiredResult::new(
            Some(InputRequests::from([(
                "user_name".to_owned(),
                ask_name("What is your name?"),
            )])),
            None,
        )),
    }
}

fn ask<const N: usize>(
    codec: &Arc<RequestStateCodec>,
    tool: &str,
    requests: [(&str, InputRequest); N],
    state: Option<State>,
) -> Result<CallToolResponse, ErrorData> {
    let requests: InputRequests = requests
        .into_iter()
        .map(|(key, request)| (key.to_owned(), request))
        .collect();
    let sealed = state
        .map(|state| {
            codec
                .seal_json_with(&state, &SealOptions::new().associated_data(tool.as_bytes()))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))
        })
        .transpose()?;
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(requests),
        sealed,
    )))
}

/// The state of the previous round; a value that fails verification is an error.
fn open_state(
    codec: &RequestStateCodec,
    tool: &str,
    sealed: Option<&str>,
) -> Result<State, ErrorData> {
    let Some(sealed) = sealed else {
        return Ok(State::default());
    };
    codec.open_json_with(sealed, tool.as_bytes()).map_err(|e| {
        ErrorData::invalid_params(format!("requestState failed verification: {e}"), None)
    })
}

fn elicitation(message: &str, schema: Value) -> InputRequest {
    let requested_schema: ElicitationSchema =
        serde_json::from_value(schema).expect("the fixture's schemas are valid");
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_owned(),
            requested_schema,
        },
    ))
}

pub(crate) fn ask_name(message: &str) -> InputRequest {
    ask_field("name", message)
}

fn ask_field(field: &str, message: &str) -> InputRequest {
    elicitation(
        message,
        json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}),
    )
}

pub(crate) fn ask_confirmation() -> InputRequest {
    elicitation(
        "Please confirm",
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}),
    )
}

fn sample(prompt: &str) -> InputRequest {
    InputRequest::CreateMessage(CreateMessageRequest::new(CreateMessageRequestParams::new(
        vec![SamplingMessage::user_text(prompt)],
        100,
    )))
}

fn list_roots() -> InputRequest {
    InputRequest::ListRoots(ListRootsRequest::default())
}

fn sampling_capability() -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    capabilities.sampling = Some(Default::default());
    capabilities
}

/// The `name` of an accepted elicitation answer.
pub(crate) fn accepted_name(answer: &Value) -> Option<String> {
    accepted_field(answer, "name")
}

fn accepted_field(answer: &Value, field: &str) -> Option<String> {
    if answer.get("action")?.as_str()? != "accept" {
        return None;
    }
    Some(answer.get("content")?.get(field)?.as_str()?.to_owned())
}

pub(crate) fn confirmed(answer: &Value) -> Option<bool> {
    if answer.get("action")?.as_str()? != "accept" {
        return Some(false);
    }
    answer.get("content")?.get("ok")?.as_bool()
}

fn sampled_text(answer: &Value) -> Option<String> {
    Some(answer.get("content")?.get("text")?.as_str()?.to_owned())
}
