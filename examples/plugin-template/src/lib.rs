//! Example format plugin: `a,b,c` text ⇄ rows of BOOLEAN / INT / BIGINT / DOUBLE / STRING columns
//! (an empty field is NULL). Everything else about the boundary is handled by the SDK.

use pulsar_connect_plugin::prelude::*;

struct Delimited;

struct Codec {
    row_type: RowType,
    delimiter: char,
}

impl codec::Guest for Delimited {
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
    fn new(options: &Options, row_type: RowType) -> Result<Codec, ConfigError> {
        let mut chars = option(options, "delimiter").unwrap_or(",").chars();
        let (Some(delimiter), None) = (chars.next(), chars.next()) else {
            return Err(ConfigError {
                option: Some("delimiter".into()),
                message: "must be one character".into(),
            });
        };
        Ok(Codec {
            row_type,
            delimiter,
        })
    }

    fn parse(&self, text: &str, ty: &DataType) -> Result<Value, String> {
        let bad = |e: &dyn std::fmt::Display| format!("`{text}`: {e}");
        Ok(match ty {
            _ if text.is_empty() => Value::Null,
            DataType::Boolean => Value::Bool(text.parse().map_err(|e| bad(&e))?),
            DataType::Int => Value::I32(text.parse().map_err(|e| bad(&e))?),
            DataType::Bigint => Value::I64(text.parse().map_err(|e| bad(&e))?),
            DataType::Double => Value::F64(text.parse().map_err(|e| bad(&e))?),
            DataType::Varchar(_) | DataType::Char(_) => Value::String(text.to_owned()),
            _ => return Err("unsupported column type".into()),
        })
    }
}

impl codec::GuestDecoder for Codec {
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
            let types = self
                .row_type
                .fields
                .iter()
                .map(|f| &self.row_type.types[f.type_index as usize].data_type);
            parts
                .iter()
                .zip(types)
                .map(|(p, t)| self.parse(p, t))
                .collect()
        })
    }
}

impl codec::GuestEncoder for Codec {
    fn encode_batch(
        &self,
        rows: ColumnBatch,
        _kinds: Option<Vec<codec::RowKind>>,
    ) -> Result<EncodedBatch, String> {
        encode_rows(&self.row_type, &rows, |values| {
            let fields: Vec<String> = values
                .iter()
                .map(|v| match v {
                    Value::Null => String::new(),
                    Value::Bool(b) => b.to_string(),
                    Value::I32(i) => i.to_string(),
                    Value::I64(i) => i.to_string(),
                    Value::F64(f) => f.to_string(),
                    Value::String(s) => s.clone(),
                    other => format!("<{}>", other.kind()),
                })
                .collect();
            Ok(fields.join(&self.delimiter.to_string()).into_bytes())
        })
    }
}

pulsar_connect_plugin::export_format!(Delimited);
