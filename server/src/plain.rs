//! Plain HTTP answers on the gRPC port: `GET /metrics` ([`crate::scrape`])
//! and the web console ([`crate::web`]). Each is a [`Responder`] that
//! answers the requests it owns; a [`PlainLayer`] puts one in front of
//! grpc-web and the services and passes every other request on unchanged.
//! Both sit inside the access layer, so a foreign origin or Host is refused
//! before either sees the request.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::body::Body;

/// Answers the plain HTTP requests it owns.
pub trait Responder {
    /// The answer to `req`, or `None` for a request that is not this
    /// responder's (it then goes on to the services).
    fn respond<B>(&self, req: &Request<B>) -> Option<Response<Body>>;
}

/// Puts a [`Responder`] in front of the inner service.
#[derive(Debug)]
pub struct PlainLayer<R> {
    responder: Arc<R>,
}

impl<R> PlainLayer<R> {
    /// A layer answering with `responder`.
    pub fn new(responder: R) -> Self {
        Self {
            responder: Arc::new(responder),
        }
    }
}

impl<R> Clone for PlainLayer<R> {
    fn clone(&self) -> Self {
        Self {
            responder: self.responder.clone(),
        }
    }
}

impl<S, R> tower::Layer<S> for PlainLayer<R> {
    type Service = Plain<S, R>;
    fn layer(&self, inner: S) -> Self::Service {
        Plain {
            inner,
            responder: self.responder.clone(),
        }
    }
}

/// See [`PlainLayer`].
#[derive(Debug)]
pub struct Plain<S, R> {
    inner: S,
    responder: Arc<R>,
}

impl<S: Clone, R> Clone for Plain<S, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            responder: self.responder.clone(),
        }
    }
}

impl<S, B, R> tower::Service<Request<B>> for Plain<S, R>
where
    S: tower::Service<Request<B>, Response = Response<Body>>,
    R: Responder,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future =
        futures::future::Either<S::Future, std::future::Ready<Result<Response<Body>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        match self.responder.respond(&req) {
            Some(resp) => futures::future::Either::Right(std::future::ready(Ok(resp))),
            None => futures::future::Either::Left(self.inner.call(req)),
        }
    }
}
