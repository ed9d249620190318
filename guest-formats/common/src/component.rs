//! [`export_component!`](crate::export_component): the wasm component of a format crate, the same
//! around every crate's native API.

/// Exports the invoking crate's component (world `format@0.2.0`) around its native API, in wasm32 builds
/// only (natively the crate is a plain library): `create-decoder` / `create-encoder` call the crate's
/// `decoder(..)` / `encoder(..)`, the resources' `decode-batch` / `encode-batch` its `Decoder::decode` /
/// `Encoder::encode`. One line in the crate's root:
///
/// - `format_common::export_component!(insert_only "json");`: an insert-only format,
///   `decoder(&options, &row_type)` (refusing metadata keys: [`no_metadata`](crate::no_metadata)) and
///   `encode(&rows)` (refusing other row kinds: [`inserts_only`](crate::inserts_only));
/// - `format_common::export_component!(changelog);`: a changelog format,
///   `decoder(&options, &row_type, &metadata)` and `encode(&rows, kinds)`.
///
/// The resources are newtypes of the invoking crate around its `Decoder` and `Encoder`: the SDK's traits
/// can only be implemented for local types, and one type cannot back both resources (raw's are one).
#[macro_export]
macro_rules! export_component {
    (insert_only $format:literal) => {
        $crate::export_component!(@component
            |options, row_type, metadata| {
                $crate::no_metadata($format, &metadata)?;
                super::decoder(&options, &row_type)
            },
            |encoder, rows, kinds| {
                $crate::inserts_only($format, kinds.as_deref())?;
                encoder.encode(&rows)
            }
        );
    };
    (changelog) => {
        $crate::export_component!(@component
            |options, row_type, metadata| super::decoder(&options, &row_type, &metadata),
            |encoder, rows, kinds| encoder.encode(&rows, kinds.as_deref())
        );
    };
    (@component $create_decoder:expr, $encode:expr) => {
        #[cfg(target_arch = "wasm32")]
        mod component {
            use $crate::__sdk::prelude::*;

            struct Component;

            /// The decoder resource.
            struct DecoderResource(super::Decoder);

            /// The encoder resource.
            struct EncoderResource(super::Encoder);

            impl codec::Guest for Component {
                type Decoder = DecoderResource;
                type Encoder = EncoderResource;

                fn create_decoder(
                    options: Options,
                    row_type: RowType,
                    metadata: Vec<String>,
                ) -> Result<codec::Decoder, ConfigError> {
                    let create: fn(
                        Options,
                        RowType,
                        Vec<String>,
                    ) -> Result<super::Decoder, ConfigError> = $create_decoder;
                    create(options, row_type, metadata)
                        .map(|d| codec::Decoder::new(DecoderResource(d)))
                }

                fn create_encoder(
                    options: Options,
                    row_type: RowType,
                ) -> Result<codec::Encoder, ConfigError> {
                    super::encoder(&options, &row_type)
                        .map(|e| codec::Encoder::new(EncoderResource(e)))
                }
            }

            impl codec::GuestDecoder for DecoderResource {
                fn decode_batch(&self, messages: MessageBatch) -> Result<DecodedBatch, String> {
                    self.0.decode(&messages)
                }
            }

            impl codec::GuestEncoder for EncoderResource {
                fn encode_batch(
                    &self,
                    rows: ColumnBatch,
                    kinds: Option<Vec<RowKind>>,
                ) -> Result<EncodedBatch, String> {
                    let encode: fn(
                        &super::Encoder,
                        ColumnBatch,
                        Option<Vec<RowKind>>,
                    ) -> Result<EncodedBatch, String> = $encode;
                    encode(&self.0, rows, kinds)
                }
            }

            $crate::__sdk::export_format!(Component with_types_in $crate::__sdk::format);
        }
    };
}
