//! The response future and body of [`GrpcCircuitBreaker`](crate::GrpcCircuitBreaker).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use interlock::{Permit, Verdict};
use pin_project_lite::pin_project;
use tonic::Code;

use crate::classify::describe;
use crate::{BoxError, GrpcStatusClassifier};

pin_project! {
    /// Resolves when the response headers arrive. A trailers-only response
    /// (an error status in the headers) or a non-200 answer is recorded
    /// then; otherwise the call goes on in the [`GrpcBody`] until its
    /// trailers. Dropping it unresolved cancels the call.
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Called {
            #[pin]
            future: F,
            permit: Option<Permit>,
            classifier: Arc<GrpcStatusClassifier>,
        },
        Refused {
            error: Option<BoxError>,
        },
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn called(future: F, permit: Permit, classifier: Arc<GrpcStatusClassifier>) -> Self {
        ResponseFuture {
            kind: Kind::Called {
                future,
                permit: Some(permit),
                classifier,
            },
        }
    }

    pub(crate) fn refused(error: BoxError) -> Self {
        ResponseFuture {
            kind: Kind::Refused { error: Some(error) },
        }
    }
}

/// Records the call's end with `code`.
fn settle(permit: Permit, classifier: &GrpcStatusClassifier, code: Code) {
    match classifier.classify_code(code) {
        Verdict::Success => permit.success(),
        verdict => permit.finish_with(verdict, &describe(code)),
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<GrpcBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Called {
                future,
                permit,
                classifier,
            } => {
                let result = ready!(future.poll(cx));
                let permit = permit.take();
                Poll::Ready(match result {
                    Ok(response) => {
                        let mut permit = permit;
                        if let Some(p) = permit.take() {
                            if response.status() != http::StatusCode::OK {
                                let code =
                                    GrpcStatusClassifier::code_of_http_status(response.status());
                                settle(p, classifier, code);
                            } else if let Some(code) =
                                GrpcStatusClassifier::status_code(response.headers())
                            {
                                // Trailers-only: the status is in the headers.
                                settle(p, classifier, code);
                            } else {
                                permit = Some(p);
                            }
                        }
                        let classifier = Arc::clone(classifier);
                        Ok(response.map(|inner| GrpcBody {
                            inner,
                            permit,
                            classifier,
                        }))
                    }
                    Err(error) => {
                        let error: BoxError = error.into();
                        // Another breaker's rejection (an inner layer's) is
                        // ignored: the permit is dropped unrecorded.
                        if let Some(permit) = permit
                            && interlock::find_rejection(&*error).is_none()
                        {
                            permit.finish_with(classifier.classify_error(&*error), &error);
                        }
                        Err(error)
                    }
                })
            }
            KindProj::Refused { error } => Poll::Ready(Err(error
                .take()
                .unwrap_or_else(|| "response future polled after completion".into()))),
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

pin_project! {
    /// The response body of a gRPC call guarded by
    /// [`GrpcCircuitBreaker`](crate::GrpcCircuitBreaker): the inner body,
    /// unchanged, whose trailers settle the call (`grpc-status` in them;
    /// none at the end of the stream is `UNKNOWN`). A body error is a
    /// failure; dropping the body before its end cancels the call (a
    /// HALF_OPEN probe slot goes back).
    pub struct GrpcBody<B> {
        #[pin]
        inner: B,
        permit: Option<Permit>,
        classifier: Arc<GrpcStatusClassifier>,
    }
}

impl<B> GrpcBody<B> {
    /// Whether the call is still open (its status not yet seen).
    #[must_use]
    pub fn is_pending(&self) -> bool {
        self.permit.is_some()
    }
}

impl<B: http_body::Body> http_body::Body for GrpcBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        match &frame {
            Some(Ok(frame)) => {
                if let Some(trailers) = frame.trailers_ref()
                    && let Some(permit) = this.permit.take()
                {
                    let code = GrpcStatusClassifier::status_code(trailers).unwrap_or(Code::Unknown);
                    settle(permit, this.classifier, code);
                }
            }
            Some(Err(_)) => {
                if let Some(permit) = this.permit.take() {
                    permit.finish_with(Verdict::Failure, &"the response body failed");
                }
            }
            None => {
                if let Some(permit) = this.permit.take() {
                    settle(permit, this.classifier, Code::Unknown);
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl<B> fmt::Debug for GrpcBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcBody")
            .field("pending", &self.permit.is_some())
            .finish_non_exhaustive()
    }
}
