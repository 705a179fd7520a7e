//! Which API a breaker serves: runtime matching in the type system (D6).
//!
//! A breaker without storage is [`Local`] and serves both the blocking and
//! the async API. A breaker coordinated through a blocking [`Storage`]
//! is [`Blocking`] and has no async methods; one coordinated through an
//! [`AsyncStorage`] is [`Async`] and has no blocking ones — a mismatch does
//! not compile:
//!
//! ```compile_fail
//! use interlock::storage::{Coordinator, MemoryStorage};
//! use interlock::CircuitBreaker;
//!
//! let coordinator = Coordinator::blocking(MemoryStorage::new());
//! let breaker = CircuitBreaker::builder("db").coordinator(&coordinator).build()?;
//! let _ = breaker.call_async(|| async { Ok::<_, std::io::Error>(()) }); // no such method
//! # Ok::<(), interlock::ConfigError>(())
//! ```
//!
//! ```
//! use interlock::storage::{Coordinator, MemoryStorage};
//! use interlock::CircuitBreaker;
//!
//! let coordinator = Coordinator::blocking(MemoryStorage::new());
//! let breaker = CircuitBreaker::builder("db").coordinator(&coordinator).build()?;
//! breaker.call(|| Ok::<_, std::io::Error>(()))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Storage`]: crate::storage::Storage
//! [`AsyncStorage`]: crate::storage::AsyncStorage

mod sealed {
    pub trait Sealed {}
}

/// A breaker's mode: [`Local`], [`Blocking`] or [`Async`].
pub trait Mode: sealed::Sealed + Send + Sync + 'static {}

/// Modes that serve the blocking API (`call`, `acquire`, `close`).
pub trait SyncApi: Mode {}

/// Modes that serve the async API (`call_async`, `acquire_async`).
pub trait AsyncApi: Mode {}

/// No storage: both APIs (the default).
#[derive(Clone, Copy, Debug)]
pub enum Local {}

/// Coordinated through a blocking storage: the blocking API only.
#[derive(Clone, Copy, Debug)]
pub enum Blocking {}

/// Coordinated through an async storage: the async API only.
#[derive(Clone, Copy, Debug)]
pub enum Async {}

impl sealed::Sealed for Local {}
impl sealed::Sealed for Blocking {}
impl sealed::Sealed for Async {}
impl Mode for Local {}
impl Mode for Blocking {}
impl Mode for Async {}
impl SyncApi for Local {}
impl SyncApi for Blocking {}
impl AsyncApi for Local {}
impl AsyncApi for Async {}
