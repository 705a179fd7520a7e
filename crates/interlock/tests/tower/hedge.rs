//! `HedgeLayer`: slow requests hedged on clones of the service, the first
//! success returned, losers dropped, no hedge into an open circuit; on
//! tokio's paused clock.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::pipeline::{Hedge, TokioSleeper};
use interlock::tower::{BoxError, CircuitBreakerLayer, HedgeLayer};
use interlock::{CircuitBreaker, CircuitOpenError, Event};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

/// Sets its flag when dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A backend whose n-th request (1-based) takes `takes(n)` ms and fails when
/// `fails(n)`; it records which requests' futures were dropped.
#[derive(Clone)]
struct Backend {
    sent: Arc<AtomicU32>,
    dropped: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
    script: Arc<dyn Fn(u32) -> (u64, bool) + Send + Sync>,
}

impl Backend {
    fn new(script: impl Fn(u32) -> (u64, bool) + Send + Sync + 'static) -> Self {
        Backend {
            sent: Arc::default(),
            dropped: Arc::default(),
            script: Arc::new(script),
        }
    }

    fn service(
        &self,
    ) -> impl Service<String, Response = String, Error = std::io::Error, Future: Send> + Clone {
        let backend = self.clone();
        service_fn(move |req: String| {
            let n = backend.sent.fetch_add(1, Ordering::SeqCst) + 1;
            let flag = Arc::new(AtomicBool::new(false));
            backend.dropped.lock().unwrap().push(flag.clone());
            let (ms, fails) = (backend.script)(n);
            async move {
                let _flag = DropFlag(flag);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if fails {
                    Err(std::io::Error::other(format!("request {n} failed")))
                } else {
                    Ok(format!("{req} from {n}"))
                }
            }
        })
    }

    fn sent(&self) -> u32 {
        self.sent.load(Ordering::SeqCst)
    }

    fn dropped(&self) -> Vec<u32> {
        let flags = self.dropped.lock().unwrap();
        (1..)
            .zip(flags.iter())
            .filter(|(_, f)| f.load(Ordering::SeqCst))
            .map(|(n, _)| n)
            .collect()
    }
}

fn hedge(max: u32, log: &Arc<Mutex<Vec<String>>>) -> Hedge {
    let sink = log.clone();
    Hedge::builder(Duration::from_millis(100))
        .name("backend")
        .max_hedged_attempts(max)
        .sleeper(TokioSleeper)
        .listener(move |e: &Event<'_>| sink.lock().unwrap().push(e.to_string()))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_slow_request_is_sent_again_and_the_first_response_wins() {
    let log = Arc::default();
    let backend = Backend::new(|n| if n == 1 { (10_000, false) } else { (30, false) });
    let mut svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(hedge(2, &log)))
        .service(backend.service());
    let start = Instant::now();
    let response = svc.ready().await.unwrap().call("q".into()).await.unwrap();
    assert_eq!(response, "q from 2");
    assert_eq!(start.elapsed(), Duration::from_millis(130));
    assert_eq!(backend.sent(), 2, "the answer came before a third was due");
    assert_eq!(backend.dropped(), [1, 2], "the slow request was dropped");
    assert_eq!(
        *log.lock().unwrap(),
        ["backend: hedged attempt 2 started after 0.100s"]
    );
    assert_eq!(svc.hedge().max_hedged_attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_request_is_replaced_and_the_last_error_comes_back() {
    let log = Arc::default();
    let backend = Backend::new(|_| (10, true));
    let mut svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(hedge(2, &log)))
        .service(backend.service());
    let err: BoxError = svc
        .ready()
        .await
        .unwrap()
        .call("q".into())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "request 3 failed");
    assert_eq!(backend.sent(), 3);
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn no_hedge_is_sent_into_an_open_circuit() {
    let log = Arc::default();
    let breaker = CircuitBreaker::new("backend");
    let backend = Backend::new(|_| (1_000, false));
    let mut svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(hedge(3, &log)))
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .service(backend.service());

    // Open from the start: the request is refused at once, nothing hedged.
    breaker.force_open();
    let start = Instant::now();
    let err = svc
        .ready()
        .await
        .unwrap()
        .call("q".into())
        .await
        .unwrap_err();
    assert!(err.downcast_ref::<CircuitOpenError>().is_some());
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(backend.sent(), 0);
    assert!(log.lock().unwrap().is_empty());

    // Opened while the request runs: the first hedge is refused by the
    // breaker, no other is started, and the request still answers.
    breaker.reset();
    let opener = {
        let breaker = breaker.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            breaker.force_open();
        })
    };
    let response = svc.ready().await.unwrap().call("q".into()).await.unwrap();
    opener.await.unwrap();
    assert_eq!(response, "q from 1");
    assert_eq!(backend.sent(), 1);
    assert_eq!(
        *log.lock().unwrap(),
        ["backend: hedged attempt 2 started after 0.100s"]
    );
}
