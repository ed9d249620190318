//! Test support.

pub mod guests;
