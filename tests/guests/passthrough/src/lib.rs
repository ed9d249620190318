//! Trivial format for the boundary benchmark: a message's payload is one BYTES column value and back.
//! No per-row work happens in the guest, so a call measures the crossing itself.
//!
//! It also stands for a third-party plugin built against the frozen WIT 0.1.0 and never rebuilt: its
//! bindings come from `wit/v0.1.0` through wit-bindgen directly (not the SDK, which exports 0.2.0), and the
//! host must keep loading it next to 0.2.0 formats (ADR 0016).

wit_bindgen::generate!({
    path: "../../../wit/v0.1.0",
    world: "format",
});

use exports::pulsar_connect::plugin::codec::{self, DecodedBatch, EncodedBatch};
use pulsar_connect::plugin::types::{
    ByteColumn, Column, ColumnBatch, ColumnData, ConfigError, DataType, MessageBatch, RowType,
};

type Options = Vec<(String, String)>;

struct Passthrough;
struct Decoder;
struct Encoder;

impl codec::Guest for Passthrough {
    type Decoder = Decoder;
    type Encoder = Encoder;

    fn create_decoder(_options: Options, row_type: RowType) -> Result<codec::Decoder, ConfigError> {
        check(&row_type)?;
        Ok(codec::Decoder::new(Decoder))
    }

    fn create_encoder(_options: Options, row_type: RowType) -> Result<codec::Encoder, ConfigError> {
        check(&row_type)?;
        Ok(codec::Encoder::new(Encoder))
    }
}

fn check(row_type: &RowType) -> Result<(), ConfigError> {
    let bytes = |i: u32| row_type.types.get(i as usize).map(|t| &t.data_type);
    match row_type.fields.as_slice() {
        [f] if matches!(
            bytes(f.type_index),
            Some(DataType::Varbinary(_) | DataType::Binary(_))
        ) =>
        {
            Ok(())
        }
        _ => Err(ConfigError {
            option: None,
            message: "passthrough needs exactly one BYTES column".into(),
        }),
    }
}

impl codec::GuestDecoder for Decoder {
    fn decode_batch(&self, messages: MessageBatch) -> Result<DecodedBatch, String> {
        let column = Column {
            validity: None,
            data: ColumnData::Bytes(ByteColumn {
                data: messages.payloads,
                offsets: messages.payload_offsets,
            }),
        };
        Ok(DecodedBatch {
            rows: ColumnBatch {
                row_count: messages.count,
                columns: vec![column],
            },
            errors: Vec::new(),
        })
    }
}

impl codec::GuestEncoder for Encoder {
    fn encode_batch(&self, rows: ColumnBatch) -> Result<EncodedBatch, String> {
        match rows.columns.into_iter().next() {
            Some(Column {
                data: ColumnData::Bytes(b),
                ..
            }) => Ok(EncodedBatch {
                payloads: b.data,
                offsets: b.offsets,
                errors: Vec::new(),
            }),
            _ => Err("passthrough expects one BYTES column".into()),
        }
    }
}

export!(Passthrough);
