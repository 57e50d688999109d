//! The request size limit: request messages over `--max-request-bytes` get
//! RESOURCE_EXHAUSTED before they are buffered.
//!
//! tonic's own `max_decoding_message_size` answers OUT_OF_RANGE, and the
//! API promises RESOURCE_EXHAUSTED; no tower or tonic layer gives that
//! status for a gRPC frame (tower-http's body limit counts bytes of the
//! whole HTTP body and answers 413), so this one reads frame headers.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tonic::Status;

/// Default of `--max-request-bytes`: gRPC's own default receive limit, so
/// every client's default send limit fits.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// Refuses request messages larger than `max` bytes with RESOURCE_EXHAUSTED.
///
/// tonic's own limit answers OUT_OF_RANGE, and the API promises
/// RESOURCE_EXHAUSTED; so this layer reads each gRPC frame header as it
/// streams by and fails the body with that status as soon as a frame
/// declares (or a body carries) more than the limit, before anything is
/// buffered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestLimitLayer {
    max: usize,
}

impl RequestLimitLayer {
    /// Refuse request messages over `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Self { max }
    }
}

impl<S> tower::Layer<S> for RequestLimitLayer {
    type Service = RequestLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequestLimit {
            inner,
            max: self.max,
        }
    }
}

/// See [`RequestLimitLayer`].
#[derive(Debug, Clone)]
pub(crate) struct RequestLimit<S> {
    inner: S,
    max: usize,
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for RequestLimit<S>
where
    S: tower::Service<http::Request<tonic::body::Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let max = self.max;
        let req = req.map(|body| tonic::body::Body::new(FrameLimit::new(body, max)));
        self.inner.call(req)
    }
}

/// A request body that checks gRPC frame lengths as they pass.
struct FrameLimit {
    inner: tonic::body::Body,
    max: usize,
    /// Bytes of the current frame header seen so far (0..5).
    header: [u8; 5],
    header_len: usize,
    /// Payload bytes of the current frame still to come.
    remaining: usize,
}

impl FrameLimit {
    fn new(inner: tonic::body::Body, max: usize) -> Self {
        Self {
            inner,
            max,
            header: [0; 5],
            header_len: 0,
            remaining: 0,
        }
    }

    /// Walks the frame structure through `data`.
    fn check(&mut self, mut data: &[u8]) -> Result<(), Status> {
        while !data.is_empty() {
            if self.remaining > 0 {
                let n = self.remaining.min(data.len());
                self.remaining -= n;
                data = &data[n..];
                continue;
            }
            let n = (5 - self.header_len).min(data.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&data[..n]);
            self.header_len += n;
            data = &data[n..];
            if self.header_len == 5 {
                let len = u32::from_be_bytes([
                    self.header[1],
                    self.header[2],
                    self.header[3],
                    self.header[4],
                ]) as usize;
                if len > self.max {
                    return Err(Status::resource_exhausted(format!(
                        "request message of {len} bytes exceeds the limit of {} bytes (--max-request-bytes)",
                        self.max
                    )));
                }
                self.header_len = 0;
                self.remaining = len;
            }
        }
        Ok(())
    }
}

impl http_body::Body for FrameLimit {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && let Err(status) = self.check(data)
                {
                    return Poll::Ready(Some(Err(status)));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_limit_reads_split_headers() {
        let mut f = FrameLimit::new(tonic::body::Body::empty(), 10);
        // A 10-byte frame, header split across chunks: fine.
        assert!(f.check(&[0, 0, 0]).is_ok());
        assert!(f.check(&[0, 10, 1, 2, 3]).is_ok());
        assert!(f.check(&[4, 5, 6, 7, 8, 9, 10]).is_ok());
        // The next frame declares 11 bytes: refused.
        let err = f.check(&[0, 0, 0, 0, 11]).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);
    }
}
