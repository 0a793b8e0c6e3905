//! An upstream's answer on its way back through a pass-through route: its body goes to the
//! client frame by frame as the upstream sends it, seen on the way by the request's metering,
//! and the request is counted when the answer ends or the client leaves (`Done`).

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
    time::Instant,
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::metered::Metered;
use crate::{
    front::Held,
    gateway::Gateway,
    metrics::PassthroughSeries,
    upstream::{BoxError, UpstreamBody},
};

/// What is recorded of one pass-through request when it is done, whichever way it ends.
pub struct Done {
    pub gateway: Arc<Gateway>,
    pub series: Arc<PassthroughSeries>,
    pub method: http::Method,
    pub started: Instant,
    /// The status of the answer given to the client, once there is one.
    pub status: Option<u16>,
    pub metered: Option<Metered>,
    /// The principal's place under `[limits]`, held until the answer has gone by.
    pub _held: Option<Held>,
}

impl Done {
    fn saw(&mut self, frame: &Frame<Bytes>) {
        if let (Some(metered), Some(data)) = (self.metered.as_mut(), frame.data_ref()) {
            metered.answer(Some(data));
        }
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(metered) = self.metered.as_mut() {
            metered.finish(&self.gateway, self.status);
        }
        self.series.record(&self.method, self.status, self.started);
    }
}

/// The upstream's answer body, relayed.
pub struct Relayed {
    /// A frame read ahead (so that it goes out with the answer's header), sent first.
    first: Option<Frame<Bytes>>,
    body: UpstreamBody,
    done: Option<Done>,
}

impl Relayed {
    pub fn new(first: Option<Frame<Bytes>>, body: UpstreamBody, mut done: Done) -> Self {
        if let Some(frame) = &first {
            done.saw(frame);
        }
        Self {
            first,
            body,
            done: Some(done),
        }
    }
}

impl Body for Relayed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(frame) = self.first.take() {
            return Poll::Ready(Some(Ok(frame)));
        }
        let polled = ready!(Pin::new(&mut self.body).poll_frame(cx));
        match &polled {
            Some(Ok(frame)) => {
                if let Some(done) = self.done.as_mut() {
                    done.saw(frame);
                }
            }
            // The end (or the upstream's failure): the request is done now, not when the
            // client's connection lets the body go.
            _ => self.done = None,
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.body.size_hint();
        let first = self.first.as_ref().and_then(Frame::data_ref);
        let ahead = first.map_or(0, |data| data.len() as u64);
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + ahead);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + ahead);
        }
        hint
    }
}
