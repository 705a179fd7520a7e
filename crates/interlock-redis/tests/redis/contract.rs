//! The public contract suite (interlock's `storage::contract`) against both
//! storages, on real time.

use std::time::Duration;

use interlock::storage::contract::{
    RealTime, asynchronous, blocking, check_async_storage, check_storage,
};
use interlock_redis::{AsyncRedisStorage, RedisStorage};

use crate::support::{Server, on_path};

/// Every timed check of the suite tolerates four ticks of lag.
fn time() -> RealTime {
    RealTime::new(Duration::from_millis(100))
}

#[test]
fn the_connecting_blocking_storage_passes_the_contract_suite() {
    let server = Server::start();
    check_storage(&crate::patient_storage(&server), &time());
}

#[test]
fn a_storage_over_one_fixed_connection_is_atomic_too() {
    let server = Server::start();
    let storage = RedisStorage::builder(server.admin()).build().unwrap();
    blocking::concurrent_leases_respect_budget(&storage, &time());
    blocking::version_sequence(&storage, &time());
    blocking::fencing_miss_writes_nothing(&storage, &time());
}

#[tokio::test]
async fn the_async_storage_passes_the_contract_suite_on_a_multiplexed_connection() {
    let server = Server::start();
    let con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let storage = AsyncRedisStorage::builder(con).build().unwrap();
    check_async_storage(&storage, &time()).await;
}

#[tokio::test]
async fn the_async_storage_works_on_a_connection_manager() {
    let server = Server::start();
    let con = server.client().get_connection_manager().await.unwrap();
    let storage = AsyncRedisStorage::builder(con).build().unwrap();
    asynchronous::concurrent_leases_respect_budget(&storage, &time()).await;
    asynchronous::version_sequence(&storage, &time()).await;
    asynchronous::expired_key_reads_absent(&storage, &time()).await;
}

#[test]
fn valkey_passes_the_contract_suite_when_installed() {
    if !on_path("valkey-server") {
        println!("note: valkey-server is not on PATH; the Valkey run is skipped");
        return;
    }
    let server = Server::start_binary("valkey-server", &[], false);
    check_storage(&crate::patient_storage(&server), &time());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let con = server
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let storage = AsyncRedisStorage::builder(con).build().unwrap();
        check_async_storage(&storage, &time()).await;
    });
}

#[test]
fn knobs_are_validated_and_errors_name_them() {
    let client = || redis::Client::open("redis://127.0.0.1:1/").unwrap();
    let b = || RedisStorage::builder(client());
    let cases = [
        (b().state_ttl(Duration::from_micros(10)), "state_ttl"),
        (b().poll_interval(Duration::ZERO), "poll_interval"),
        (b().retry_backoff(Duration::ZERO), "retry_backoff"),
        (
            b().retry_backoff_multiplier(0.5),
            "retry_backoff_multiplier",
        ),
        (b().retry_backoff_max(Duration::ZERO), "retry_backoff_max"),
        (b().retry_jitter(f64::NAN), "retry_jitter"),
        (b().write_queue_size(0), "write_queue_size"),
        (b().key_prefix("svc{"), "key_prefix"),
        (b().key_prefix("svc{}:"), "key_prefix"),
    ];
    for (builder, knob) in cases {
        assert_eq!(builder.build().unwrap_err().field(), knob);
    }
    let storage = b()
        .key_prefix("checkout:{cb}:")
        .state_ttl(Duration::from_secs(90))
        .poll_interval(Duration::from_millis(250))
        .retry_backoff(Duration::from_secs(1))
        .retry_backoff_multiplier(2.0)
        .retry_backoff_max(Duration::from_secs(30))
        .retry_jitter(0.2)
        .write_queue_size(16)
        .build()
        .unwrap();
    let s = interlock::storage::Storage::settings(&storage);
    assert_eq!(
        (s.state_ttl(), s.poll_interval(), s.write_queue_size()),
        (Duration::from_secs(90), Duration::from_millis(250), 16)
    );
    assert_eq!(storage.key_prefix(), "checkout:{cb}:");
    assert_eq!(storage.key("db"), "checkout:{cb}:db");
}
