//! Pulsar client layer (magnetar-driver), see docs/adr/0001-pulsar-client.md.
