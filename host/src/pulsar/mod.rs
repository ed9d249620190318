//! The Pulsar client layer, on `magnetar-driver` (see `docs/adr/0001-pulsar-client.md`).
//!
//! Everything the connectors need from the client goes through here: connecting with authentication (token, OAuth2:
//! [`oauth2`]), TLS and reconnect supervision ([`client`]), and message ids in the forms users and checkpoints use
//! ([`message_id`]).

pub mod admin;
pub mod client;
pub mod client_cert;
pub mod errors;
pub mod message;
pub mod message_id;
pub mod oauth2;
pub mod reader;
pub mod topics;
pub mod transactions;
pub mod writer;

pub use client::{Authentication, ClientConfig, TlsOptions, connect};
pub use message_id::{MessageIdParseError, parse_message_id};
