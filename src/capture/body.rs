//! The answer's body on its way to the client, its bytes copied into the request's capture as
//! they are sent (a leaf of `capture`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::record::Capture;

/// A body whose data frames are also kept in `capture`.
pub struct Teed {
    body: axum::body::Body,
    capture: Arc<Capture>,
}

impl Teed {
    pub fn new(body: axum::body::Body, capture: Arc<Capture>) -> Self {
        Self { body, capture }
    }
}

impl http_body::Body for Teed {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.capture.answer_bytes(data);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// `resp` with its status and headers noted in `capture`, and its body teed into it.
pub fn teed(
    resp: axum::response::Response,
    capture: Option<&Arc<Capture>>,
) -> axum::response::Response {
    let Some(c) = capture else {
        return resp;
    };
    c.answer(resp.status().as_u16(), resp.headers());
    let c = c.clone();
    resp.map(|b| axum::body::Body::new(Teed::new(b, c)))
}
