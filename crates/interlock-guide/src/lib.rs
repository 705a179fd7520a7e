//! The interlock guides, as rustdoc.
//!
//! This crate has no code. Each module below is one Markdown guide of the
//! repository's `docs/` folder, included verbatim, so the guides read well
//! on a code host *and* every Rust example in them is compiled and run by
//! `cargo test` (as a doctest of this crate), against the crates of this
//! workspace at the same commit. An example that stops compiling, or
//! whose assertions stop holding, fails the test suite.
//!
//! Links between guides point at the Markdown files (`configuration.md`),
//! which is what a code host renders; in this rendering, use the module
//! list instead.
//!
//! | module | file |
//! |---|---|
//! | [`readme`] | `README.md` |
//! | [`getting_started`] | `docs/getting-started.md` |
//! | [`demos`] | `docs/demos.md` |
//! | [`configuration`] | `docs/configuration.md` |
//! | [`states`] | `docs/states.md` |
//! | [`classification`] | `docs/classification.md` |
//! | [`observability`] | `docs/observability.md` |
//! | [`pipeline`] | `docs/pipeline.md` |
//! | [`strategies`] | `docs/strategies.md` |
//! | [`integrations`] | `docs/integrations.md` |
//! | [`web_frameworks`] | `docs/web-frameworks.md` |
//! | [`coordination`] | `docs/coordination.md` |
//! | [`polyglot`] | `docs/polyglot.md` |
//! | [`performance`] | `docs/performance.md` |
//! | [`correctness`] | `docs/correctness.md` |
//! | [`limits`] | `docs/limits.md` |
//! | [`comparison`] | `docs/comparison.md` |
//! | [`migration`] | `docs/migration.md` |
//!
//! The guide index, `docs/README.md`, follows.
//!
#![doc = include_str!("../../../docs/README.md")]
#![forbid(unsafe_code)]
#![doc(test(attr(deny(warnings))))]

pub mod readme {
    #![doc = include_str!("../../../README.md")]
}

pub mod getting_started {
    #![doc = include_str!("../../../docs/getting-started.md")]
}

pub mod demos {
    #![doc = include_str!("../../../docs/demos.md")]
}

pub mod configuration {
    #![doc = include_str!("../../../docs/configuration.md")]
}

pub mod states {
    #![doc = include_str!("../../../docs/states.md")]
}

pub mod classification {
    #![doc = include_str!("../../../docs/classification.md")]
}

pub mod observability {
    #![doc = include_str!("../../../docs/observability.md")]
}

pub mod pipeline {
    #![doc = include_str!("../../../docs/pipeline.md")]
}

pub mod strategies {
    #![doc = include_str!("../../../docs/strategies.md")]
}

pub mod integrations {
    #![doc = include_str!("../../../docs/integrations.md")]
}

pub mod web_frameworks {
    #![doc = include_str!("../../../docs/web-frameworks.md")]
}

pub mod llm_providers {
    #![doc = include_str!("../../../docs/llm-providers.md")]
}

pub mod coordination {
    #![doc = include_str!("../../../docs/coordination.md")]
}

pub mod polyglot {
    #![doc = include_str!("../../../docs/polyglot.md")]
}

pub mod performance {
    #![doc = include_str!("../../../docs/performance.md")]
}

pub mod correctness {
    #![doc = include_str!("../../../docs/correctness.md")]
}

pub mod limits {
    #![doc = include_str!("../../../docs/limits.md")]
}

pub mod comparison {
    #![doc = include_str!("../../../docs/comparison.md")]
}

pub mod migration {
    #![doc = include_str!("../../../docs/migration.md")]
}
