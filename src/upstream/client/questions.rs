//! Requests an upstream sends a client (sampling, elicitation, roots), relayed as the upstream
//! wrote them. They are lifted off the wire whole (`augmented::lift`), so their numbers, the
//! fields rmcp's model does not know and the fields the upstream left out reach the client
//! unchanged; the typed request is made only for the checks (which client, and whether it
//! declared what the request needs). The client's answer goes back as the client wrote it.

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{CustomResult, ElicitRequestParams, ListRootsRequest, ServerRequest},
    service::{RequestContext, RoleClient},
};
use serde_json::{Value, json};

use super::{UpstreamClient, tasks::typed};
use crate::downstream::{Downstream, TaskRequest, ask_client_raw, kind};

impl UpstreamClient {
    /// Asks the client the request concerns `method` with `params`, as written; its answer.
    pub(super) async fn ask_plainly(
        &self,
        method: &str,
        mut params: Option<Value>,
        context: &RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        let request = match TaskRequest::of_method(method) {
            Some(asked) => typed(asked, params.as_ref().unwrap_or(&json!({})))?,
            None => ServerRequest::ListRootsRequest(ListRootsRequest::default()),
        };
        let Some(target) = self.target_if_any(context, &request).await? else {
            if matches!(request, ServerRequest::ListRootsRequest(_)) {
                // Asked on the upstream's own account: the roots configured for it (none
                // unless `roots` names some).
                let roots: Vec<Value> = self.roots.iter().map(|uri| json!({"uri": uri})).collect();
                return Ok(CustomResult(json!({ "roots": roots })));
            }
            return Err(super::no_client(&request));
        };
        self.before_asking(&request, &target, params.as_mut());
        let params = params.map(|params| params.to_string());
        let what = (kind(&request), method);
        let answer = ask_client_raw(&target, what, params.as_deref(), &context.ct).await?;
        serde_json::from_str(answer.get())
            .map(CustomResult)
            .map_err(|error| {
                ErrorData::internal_error(format!("the client's answer is not JSON: {error}"), None)
            })
    }

    /// What is done before `request` (with `params`, as written) is sent to `target`: a URL
    /// elicitation noted, so that its completion goes to the same client; the task its
    /// `_meta` relates it to named as the client knows that task.
    pub(super) fn before_asking(
        &self,
        request: &ServerRequest,
        target: &Arc<Downstream>,
        params: Option<&mut Value>,
    ) {
        if let ServerRequest::ElicitRequest(elicit) = request
            && let ElicitRequestParams::UrlElicitationParams { elicitation_id, .. } = &elicit.params
        {
            self.relay
                .elicitation_sent(elicitation_id.clone(), target.clone());
        }
        let meta = params.and_then(|params| params.get_mut("_meta"));
        if let Some(meta) = meta.and_then(Value::as_object_mut) {
            self.relate(meta);
        }
    }
}
