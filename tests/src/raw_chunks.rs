//! The first chunks of a chunked message whose producer dies before the rest: written on the wire
//! protocol by hand (no client library lets a test stop between two chunks), then the connection is
//! dropped as a killed process drops it. Issue 48 §2: such a message must not block its partition.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use bytes::{Bytes, BytesMut};
use magnetar::proto::frame;
use magnetar::proto::pb;
use pb::base_command::Type;

/// Writes chunks `0..sent` of a message announced as `total` chunks of `chunk_size` bytes each to
/// `topic` (a non-partitioned topic, or one partition's full name) and closes the connection with the
/// rest unsent. Returns the message's uuid. The broker at `service_url` must own the topic (one broker).
pub fn write_first_chunks(
    service_url: &str,
    topic: &str,
    sent: i32,
    total: i32,
    chunk_size: usize,
) -> Result<String> {
    let addr = service_url
        .strip_prefix("pulsar://")
        .context("a pulsar:// service URL")?;
    let mut conn = RawConnection::open(addr)?;
    conn.request(command(Type::Connect, |c| {
        c.connect = Some(pb::CommandConnect {
            client_version: "pulsar-connect-tests-raw".into(),
            protocol_version: Some(21),
            ..Default::default()
        })
    }))?;
    conn.expect(Type::Connected)?;
    // Loads the topic on this broker (a producer on a topic not yet loaded is refused).
    conn.request(command(Type::Lookup, |c| {
        c.lookup_topic = Some(pb::CommandLookupTopic {
            topic: topic.into(),
            request_id: 1,
            ..Default::default()
        })
    }))?;
    conn.expect(Type::LookupResponse)?;
    conn.request(command(Type::Producer, |c| {
        c.producer = Some(pb::CommandProducer {
            topic: topic.into(),
            producer_id: 1,
            request_id: 2,
            ..Default::default()
        })
    }))?;
    let success = conn.expect(Type::ProducerSuccess)?;
    let producer_name = success
        .producer_success
        .context("PRODUCER_SUCCESS without its body")?
        .producer_name;
    let uuid = format!("{producer_name}-0");
    let publish_time = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    for chunk in 0..sent {
        let send = command(Type::Send, |c| {
            c.send = Some(pb::CommandSend {
                producer_id: 1,
                sequence_id: 0,
                num_messages: Some(1),
                is_chunk: Some(true),
                ..Default::default()
            })
        });
        let metadata = pb::MessageMetadata {
            producer_name: producer_name.clone(),
            sequence_id: 0,
            publish_time,
            uuid: Some(uuid.clone()),
            num_chunks_from_msg: Some(total),
            total_chunk_msg_size: Some(chunk_size as i32 * total),
            chunk_id: Some(chunk),
            ..Default::default()
        };
        let mut out = BytesMut::new();
        frame::encode_payload(&mut out, &send, &metadata, &vec![b'x'; chunk_size])?;
        conn.stream.write_all(&out)?;
        conn.expect(Type::SendReceipt)?;
    }
    // Dropped without CLOSE_PRODUCER: the producer is gone with its message half written.
    Ok(uuid)
}

fn command(kind: Type, fill: impl FnOnce(&mut pb::BaseCommand)) -> pb::BaseCommand {
    let mut c = pb::BaseCommand {
        r#type: kind as i32,
        ..Default::default()
    };
    fill(&mut c);
    c
}

struct RawConnection {
    stream: TcpStream,
    inbound: BytesMut,
}

impl RawConnection {
    fn open(addr: &str) -> Result<Self> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connect to {addr}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self {
            stream,
            inbound: BytesMut::new(),
        })
    }

    fn request(&mut self, cmd: pb::BaseCommand) -> Result<()> {
        let mut out = BytesMut::new();
        frame::encode_command(&mut out, &cmd)?;
        self.stream.write_all(&out)?;
        Ok(())
    }

    /// The next command of kind `kind`, answering the broker's pings on the way; an error or any
    /// other reply fails with what the broker said.
    fn expect(&mut self, kind: Type) -> Result<pb::BaseCommand> {
        loop {
            while let Some(len) = frame::peek_full_frame_len(&self.inbound)? {
                let mut bytes: Bytes = self.inbound.split_to(len).freeze();
                let got = frame::decode_one(&mut bytes)?.command;
                if got.r#type == kind as i32 {
                    return Ok(got);
                }
                if got.r#type == Type::Ping as i32 {
                    self.request(command(Type::Pong, |c| c.pong = Some(Default::default())))?;
                    continue;
                }
                bail!("expected {kind:?} from the broker, got {got:?}");
            }
            let mut buf = [0u8; 64 * 1024];
            let n = self.stream.read(&mut buf).context("read from the broker")?;
            if n == 0 {
                bail!("the broker closed the connection while {kind:?} was awaited");
            }
            self.inbound.extend_from_slice(&buf[..n]);
        }
    }
}
