//! One module per peer library, each with the same shape as [`crate::ours`].
//!
//! | module | crate (pinned) | driven | scenarios |
//! | --- | --- | --- | --- |
//! | [`failsafe`] | `failsafe =1.3.0` | sync | closed, rejected, half-open, contended, time window |
//! | [`recloser`] | `recloser =1.4.0` | sync | closed, rejected, half-open, contended |
//! | [`tower_resilience`] | `tower-resilience-circuitbreaker =0.14.0` | async | closed, rejected, half-open, contended, time window |
//! | [`seatbelt`] | `seatbelt =0.11.0` | async | closed, rejected, half-open, contended, time window |
//! | [`circuitbreaker_rs`] | `circuitbreaker-rs =0.1.1` | sync | closed, rejected, half-open, contended |

pub mod circuitbreaker_rs;
pub mod failsafe;
pub mod recloser;
pub mod seatbelt;
pub mod tower_resilience;
