//! A misbehaving format for the sandbox tests. Each message's payload is a command:
//! `loop` spins forever, `bomb` allocates until memory runs out, `panic` panics, `file` tries to read
//! `/etc/passwd`, `socket:PORT` tries to connect to 127.0.0.1:PORT, `shout` writes 1000 lines to stdout and
//! stderr; anything else decodes to a row (payload, tag, calls, decoders) where `calls` counts the
//! decode calls this instance has served and `decoders` the decoders it has created: after a trap the
//! host runs a fresh instance, so both start again from 1. With `panic-every-batch` every batch panics.

use std::sync::atomic::{AtomicI64, Ordering};

use pulsar_connect_plugin::prelude::*;

static CALLS: AtomicI64 = AtomicI64::new(0);
static DECODERS: AtomicI64 = AtomicI64::new(0);

struct Hostile;

struct Decoder {
    row_type: RowType,
    tag: String,
    panic_every_batch: bool,
}

struct Encoder;

impl codec::Guest for Hostile {
    type Decoder = Decoder;
    type Encoder = Encoder;

    fn create_decoder(
        options: Options,
        row_type: RowType,
        _metadata: Vec<String>,
    ) -> Result<codec::Decoder, ConfigError> {
        if option(&options, "refuse") == Some("true") {
            return Err(ConfigError {
                option: Some("refuse".into()),
                message: "asked to refuse".into(),
            });
        }
        DECODERS.fetch_add(1, Ordering::Relaxed);
        let tag = option(&options, "tag").unwrap_or_default().to_owned();
        let panic_every_batch = option(&options, "panic-every-batch") == Some("true");
        Ok(codec::Decoder::new(Decoder {
            row_type,
            tag,
            panic_every_batch,
        }))
    }

    fn create_encoder(
        _options: Options,
        _row_type: RowType,
    ) -> Result<codec::Encoder, ConfigError> {
        Ok(codec::Encoder::new(Encoder))
    }
}

impl codec::GuestDecoder for Decoder {
    fn decode_batch(&self, messages: MessageBatch) -> Result<DecodedBatch, String> {
        if self.panic_every_batch {
            panic!("hostile guest asked to panic in every batch");
        }
        let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        decode_rows(&self.row_type, &messages, |m| {
            match m.payload {
                b"loop" => {
                    let mut n = 0u64;
                    loop {
                        n = std::hint::black_box(n.wrapping_add(1));
                    }
                }
                b"bomb" => {
                    let mut hoard: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hoard.push(vec![1u8; 1 << 20]);
                        std::hint::black_box(&hoard);
                    }
                }
                b"panic" => panic!("hostile guest panics on purpose"),
                b"file" => {
                    return match std::fs::read_to_string("/etc/passwd") {
                        Ok(text) => Ok(vec![
                            Value::Bytes(text.into_bytes()),
                            Value::Null,
                            Value::Null,
                            Value::Null,
                        ]),
                        Err(e) => Err(format!("open /etc/passwd: {e}")),
                    };
                }
                p if p.starts_with(b"socket:") => {
                    let addr = format!("127.0.0.1:{}", String::from_utf8_lossy(&p[7..]));
                    return match std::net::TcpStream::connect(&addr) {
                        Ok(_) => Ok(vec![
                            Value::Bytes(b"connected".to_vec()),
                            Value::Null,
                            Value::Null,
                            Value::Null,
                        ]),
                        Err(e) => Err(format!("connect {addr}: {e}")),
                    };
                }
                b"shout" => {
                    for i in 0..1000 {
                        println!("stdout line {i}");
                        eprintln!("stderr line {i}");
                    }
                }
                _ => {}
            }
            Ok(vec![
                Value::Bytes(m.payload.to_vec()),
                Value::String(self.tag.clone()),
                Value::I64(calls),
                Value::I64(DECODERS.load(Ordering::Relaxed)),
            ])
        })
    }
}

impl codec::GuestEncoder for Encoder {
    fn encode_batch(
        &self,
        _rows: ColumnBatch,
        _kinds: Option<Vec<codec::RowKind>>,
    ) -> Result<EncodedBatch, String> {
        Err("the hostile format does not encode".into())
    }
}

pulsar_connect_plugin::export_format!(Hostile);
