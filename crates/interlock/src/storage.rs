//! Shared state across a fleet: the storage contract, an in-memory storage,
//! and the coordinator that keeps breakers in step with it.
//!
//! A storage holds one record per breaker name, [`SharedState`], and changes
//! it only through the eight *intent* operations of [`Storage`] (blocking)
//! or [`AsyncStorage`]: each is atomic, writes are fenced by version where a
//! stale decision could overwrite a newer one, every applied write refreshes
//! a TTL, and elapsed checks use the storage's own clock (R16). Two of them
//! exist for liveness (issue 21): [`Storage::restart_stalled_round`] ends a
//! HALF_OPEN round whose probes will never report, and [`Storage::restore`]
//! repairs a record whose history went backwards.
//!
//! The local machine keeps owning the window and trip detection; the storage
//! owns the shared OPEN / HALF_OPEN state and the fleet-wide probe budget.
//!
//! (This module is the public face of two private ones: the storage
//! contract and `MemoryStorage` live in `store`, which names nothing of the
//! breaker; the [`Coordinator`] lives with the breaker, which it drives.)

pub use crate::breaker::coordinator::Coordinator;
// Everything public in `store` (the contract, `MemoryStorage`, and the
// `contract` and `testing` modules under feature `testing`), without a
// second list to keep in step.
pub use crate::store::*;
