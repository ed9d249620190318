//! The `{{name}}` format: one line of delimited text per message ⇄ one row. Columns may be BOOLEAN, INT,
//! BIGINT, DOUBLE or STRING; an empty field is NULL. Change `Codec` to your format; the SDK
//! (`pulsar_connect_plugin`) does the rest of the boundary.

use pulsar_connect_plugin::prelude::*;

/// The plugin: its factories make a configured decoder or encoder.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Plugin;

/// A configured decoder and encoder: the table's row type and the parsed options.
pub struct Codec {
    row_type: RowType,
    delimiter: char,
}

impl codec::Guest for Plugin {
    type Decoder = Codec;
    type Encoder = Codec;

    fn create_decoder(
        options: Options,
        row_type: RowType,
        _metadata: Vec<String>,
    ) -> Result<codec::Decoder, ConfigError> {
        Ok(codec::Decoder::new(Codec::new(&options, row_type)?))
    }

    fn create_encoder(options: Options, row_type: RowType) -> Result<codec::Encoder, ConfigError> {
        Ok(codec::Encoder::new(Codec::new(&options, row_type)?))
    }
}

impl Codec {
    /// Checks the options and the row type once, when a table is set up (not per message).
    pub fn new(options: &Options, row_type: RowType) -> Result<Codec, ConfigError> {
        let mut chars = option(options, "delimiter").unwrap_or(",").chars();
        let (Some(delimiter), None) = (chars.next(), chars.next()) else {
            return Err(ConfigError {
                option: Some("delimiter".into()),
                message: "must be one character".into(),
            });
        };
        for field in &row_type.fields {
            match &row_type.types[field.type_index as usize].data_type {
                DataType::Boolean
                | DataType::Int
                | DataType::Bigint
                | DataType::Double
                | DataType::Varchar(_) => {}
                _ => {
                    return Err(ConfigError {
                        option: None,
                        message: format!(
                            "column `{}`: only BOOLEAN, INT, BIGINT, DOUBLE and STRING columns are supported",
                            field.name
                        ),
                    });
                }
            }
        }
        Ok(Codec {
            row_type,
            delimiter,
        })
    }

    fn column_type(&self, i: usize) -> &DataType {
        &self.row_type.types[self.row_type.fields[i].type_index as usize].data_type
    }

    fn parse(text: &str, ty: &DataType) -> Result<Value, String> {
        let bad = |e: &dyn std::fmt::Display| format!("`{text}`: {e}");
        Ok(match ty {
            _ if text.is_empty() => Value::Null,
            DataType::Boolean => Value::Bool(text.parse().map_err(|e| bad(&e))?),
            DataType::Int => Value::I32(text.parse().map_err(|e| bad(&e))?),
            DataType::Bigint => Value::I64(text.parse().map_err(|e| bad(&e))?),
            DataType::Double => Value::F64(text.parse().map_err(|e| bad(&e))?),
            _ => Value::String(text.to_owned()),
        })
    }
}

impl codec::GuestDecoder for Codec {
    /// One row per message, or a row error naming what is wrong with it (the batch goes on).
    fn decode_batch(&self, messages: MessageBatch) -> Result<DecodedBatch, String> {
        decode_rows(&self.row_type, &messages, |m| {
            let parts: Vec<&str> = m.text()?.split(self.delimiter).collect();
            if parts.len() != self.row_type.fields.len() {
                return Err(format!(
                    "{} fields, expected {}",
                    parts.len(),
                    self.row_type.fields.len()
                ));
            }
            parts
                .iter()
                .enumerate()
                .map(|(i, p)| Codec::parse(p, self.column_type(i)))
                .collect()
        })
    }
}

impl codec::GuestEncoder for Codec {
    /// One payload per row.
    fn encode_batch(
        &self,
        rows: ColumnBatch,
        _kinds: Option<Vec<RowKind>>,
    ) -> Result<EncodedBatch, String> {
        encode_rows(&self.row_type, &rows, |values| {
            let mut fields = Vec::with_capacity(values.len());
            for v in values {
                fields.push(match v {
                    Value::Null => String::new(),
                    Value::Bool(b) => b.to_string(),
                    Value::I32(i) => i.to_string(),
                    Value::I64(i) => i.to_string(),
                    Value::F64(f) => f.to_string(),
                    Value::String(s) if s.contains(self.delimiter) => {
                        return Err(format!("`{s}` contains the delimiter"));
                    }
                    Value::String(s) => s.clone(),
                    other => return Err(format!("unsupported value {}", other.kind())),
                });
            }
            Ok(fields.join(&self.delimiter.to_string()).into_bytes())
        })
    }
}

// The component's exports (only in the wasm build: natively the tests call `Codec` directly).
#[cfg(target_arch = "wasm32")]
pulsar_connect_plugin::export_format!(Plugin);

/// Unit tests, natively (`cargo test`): the codec's methods called directly with the SDK's test builders.
#[cfg(test)]
mod tests {
    use super::*;
    use codec::{GuestDecoder as _, GuestEncoder as _};
    use pulsar_connect_plugin::testing::{
        RowTypeBuilder, column_batch, decoded_rows, message_batch, payloads,
    };

    fn row_type() -> RowType {
        RowTypeBuilder::new()
            .column_not_null("id", DataType::Int)
            .string("name")
            .column("ok", DataType::Boolean)
            .build()
    }

    #[test]
    fn decodes_rows_and_reports_bad_messages() {
        let codec = Codec::new(&vec![], row_type()).unwrap();
        let decoded = codec
            .decode_batch(message_batch(&[b"1,a,true", b"x,b,false", b"2,,"]))
            .unwrap();
        assert_eq!(
            decoded_rows(&row_type(), &decoded),
            vec![
                vec![Value::I32(1), Value::from("a"), Value::Bool(true)],
                vec![Value::I32(2), Value::Null, Value::Null],
            ]
        );
        assert_eq!(decoded.errors.len(), 1);
        assert_eq!(decoded.errors[0].index, 1);
        assert!(decoded.errors[0].reason.contains("`x`"));
    }

    #[test]
    fn encodes_rows() {
        let options = vec![("delimiter".to_owned(), ";".to_owned())];
        let codec = Codec::new(&options, row_type()).unwrap();
        let rows = column_batch(
            &row_type(),
            &[vec![Value::I32(7), Value::from("b"), Value::Null]],
        );
        let encoded = codec.encode_batch(rows, None).unwrap();
        assert_eq!(payloads(&encoded), vec![b"7;b;".to_vec()]);
    }

    #[test]
    fn refuses_bad_options() {
        let options = vec![("delimiter".to_owned(), "::".to_owned())];
        let err = Codec::new(&options, row_type()).err().unwrap();
        assert_eq!(err.option.as_deref(), Some("delimiter"));
    }
}
