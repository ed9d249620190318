//! Host bindings, one frozen module per released WIT version (Zed-style). A new WIT version gets a new
//! module beside `v0_1_0`; the facades convert from each into the host's types.

pub mod v0_1_0;
