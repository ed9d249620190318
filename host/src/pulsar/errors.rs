//! Client failures classified once, where they leave magnetar, so callers match a variant instead of
//! searching error text. magnetar carries the broker's `ServerError` code on some errors
//! (`ClientError::Broker`, `SendRejected`) and renders others to text (its transaction calls turn `TxnError`
//! into `ClientError::Other("end_txn: …")`): the codes are read first, the texts — magnetar's own renderings
//! of those codes — only in the functions below.

use magnetar::PulsarError;
use magnetar::proto::pb::ServerError;
use magnetar::runtime_tokio::ClientError;

/// What a failed client call means to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The topic's schema refuses the producer's (`ServerError::IncompatibleSchema`).
    IncompatibleSchema,
    /// Ending a transaction the coordinator no longer knows as open: not found, already aborted or in
    /// another state (`TransactionNotFound`, `InvalidTxnStatus`, a timed-out transaction). Its outcome is
    /// unknown to this call; the caller decides from its own records.
    TransactionGone,
    /// An acknowledgement inside a transaction that another transaction holds (pending) or that was
    /// acknowledged already (`TransactionConflict`): another consumer of the subscription had the message.
    TransactionConflict,
    /// Anything else.
    Other,
}

/// Classifies a façade error (producer, consumer and reader creation).
pub fn classify(e: &PulsarError) -> Failure {
    match e {
        PulsarError::Client(c) => classify_client(c),
        other => classify_text(&other.to_string()),
    }
}

/// Classifies an engine error (the transaction coordinator client).
pub fn classify_client(e: &ClientError) -> Failure {
    match e {
        ClientError::Broker { code, message } | ClientError::SendRejected { code, message } => {
            match ServerError::try_from(*code) {
                Ok(ServerError::IncompatibleSchema) => Failure::IncompatibleSchema,
                Ok(ServerError::TransactionNotFound | ServerError::InvalidTxnStatus) => {
                    Failure::TransactionGone
                }
                Ok(ServerError::TransactionConflict) => Failure::TransactionConflict,
                _ => classify_text(message),
            }
        }
        other => classify_text(&other.to_string()),
    }
}

/// The texts magnetar renders the same failures as when it drops the code.
fn classify_text(text: &str) -> Failure {
    let lower = text.to_ascii_lowercase();
    if lower.contains("incompatibleschema") || lower.contains("incompatible schema") {
        Failure::IncompatibleSchema
    } else if lower.contains("transactionconflict") {
        Failure::TransactionConflict
    } else if lower.contains("not found")
        || lower.contains("invalid txn status")
        || lower.contains("aborted")
    {
        Failure::TransactionGone
    } else {
        Failure::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_codes_are_read_before_texts() {
        let schema = ClientError::Broker {
            code: ServerError::IncompatibleSchema as i32,
            message: "Trying to subscribe with incompatible schema".into(),
        };
        assert_eq!(classify_client(&schema), Failure::IncompatibleSchema);
        let gone = ClientError::Broker {
            code: ServerError::TransactionNotFound as i32,
            message: "x".into(),
        };
        assert_eq!(classify_client(&gone), Failure::TransactionGone);
        let conflict = ClientError::Broker {
            code: ServerError::TransactionConflict as i32,
            message: "try to ack message:3:4 in pending ack status.".into(),
        };
        assert_eq!(classify_client(&conflict), Failure::TransactionConflict);
        let other = ClientError::Broker {
            code: ServerError::ServiceNotReady as i32,
            message: "not ready".into(),
        };
        assert_eq!(classify_client(&other), Failure::Other);
    }

    #[test]
    fn stringified_transaction_errors_are_recognised() {
        for text in [
            "end_txn: transaction not found",
            "end_txn: transaction aborted",
            "end_txn: broker error 21: Invalid txn status",
        ] {
            assert_eq!(
                classify_client(&ClientError::Other(text.into())),
                Failure::TransactionGone,
                "{text}"
            );
        }
        assert_eq!(
            classify_client(&ClientError::Other("end_txn: timed out".into())),
            Failure::Other
        );
        assert_eq!(
            classify(&PulsarError::Other(
                "org.apache.pulsar.broker.service.schema.exceptions.IncompatibleSchemaException"
                    .into()
            )),
            Failure::IncompatibleSchema
        );
    }
}
