//! The frames of one direction of a Pulsar connection (`[total_size][command_size][command][payload]`),
//! read as they pass: their command kinds, and, where asked, the bytes to pass on without the frames
//! picked to be lost.

use bytes::{BufMut, Bytes, BytesMut};
use magnetar::proto::frame;

#[derive(Default)]
pub(super) struct Frames {
    /// Bytes read but not yet passed on: at most a frame's size fields and command.
    pending: BytesMut,
    /// Bytes of the current frame still to come (its payload), and whether they are lost.
    skip: usize,
    losing: bool,
    /// A frame's sizes made no sense (not a Pulsar stream): everything passes unread from here.
    broken: bool,
}

impl Frames {
    /// Reads `data`: returns the command kinds of the frames whose command it completes. With `out`,
    /// appends to it the bytes to pass on: everything but the frames `lose` picks (asked once per frame,
    /// with its kind); bytes of a frame whose command is not complete yet are held back until it is.
    pub(super) fn feed(
        &mut self,
        mut data: &[u8],
        mut out: Option<&mut Vec<u8>>,
        lose: &mut dyn FnMut(i32) -> bool,
    ) -> Vec<i32> {
        let mut kinds = Vec::new();
        while !data.is_empty() {
            if self.broken {
                if let Some(o) = out.as_deref_mut() {
                    o.extend_from_slice(data);
                }
                break;
            }
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                if !self.losing
                    && let Some(o) = out.as_deref_mut()
                {
                    o.extend_from_slice(&data[..n]);
                }
                self.skip -= n;
                data = &data[n..];
                continue;
            }
            self.pending.extend_from_slice(data);
            data = &[];
            while self.pending.len() >= 8 {
                let p = &self.pending;
                let total = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize;
                let cmd = u32::from_be_bytes([p[4], p[5], p[6], p[7]]) as usize;
                if cmd + 4 > total {
                    self.broken = true;
                    if let Some(o) = out.as_deref_mut() {
                        o.extend_from_slice(&self.pending);
                    }
                    self.pending.clear();
                    break;
                }
                if self.pending.len() < 8 + cmd {
                    break;
                }
                // The command alone, as a frame of its own.
                let mut head = BytesMut::with_capacity(8 + cmd);
                head.put_u32((4 + cmd) as u32);
                head.put_u32(cmd as u32);
                head.extend_from_slice(&self.pending[8..8 + cmd]);
                let mut head: Bytes = head.freeze();
                let lost = match frame::decode_one(&mut head) {
                    Ok(f) => {
                        kinds.push(f.command.r#type);
                        lose(f.command.r#type)
                    }
                    Err(_) => false,
                };
                let frame_len = 4 + total;
                let n = frame_len.min(self.pending.len());
                let bytes = self.pending.split_to(n);
                if !lost && let Some(o) = out.as_deref_mut() {
                    o.extend_from_slice(&bytes);
                }
                if n < frame_len {
                    self.skip = frame_len - n;
                    self.losing = lost;
                }
            }
        }
        kinds
    }
}

#[cfg(test)]
mod tests {
    use magnetar::proto::pb::base_command::Type;

    use super::*;

    fn wire() -> BytesMut {
        let mut wire = BytesMut::new();
        let cmd = |t: Type| magnetar::proto::pb::BaseCommand {
            r#type: t as i32,
            ..Default::default()
        };
        frame::encode_command(&mut wire, &cmd(Type::Ping)).unwrap();
        frame::encode_payload(
            &mut wire,
            &cmd(Type::Send),
            &Default::default(),
            &vec![1u8; 100_000],
        )
        .unwrap();
        frame::encode_command(&mut wire, &cmd(Type::EndTxn)).unwrap();
        wire
    }

    #[test]
    fn command_kinds_are_read_across_reads_and_payloads_skipped() {
        let wire = wire();
        for step in [1, 3, 7, 4096, wire.len()] {
            let mut s = Frames::default();
            let kinds: Vec<i32> = wire
                .chunks(step)
                .flat_map(|c| s.feed(c, None, &mut |_| false))
                .collect();
            assert_eq!(
                kinds,
                vec![Type::Ping as i32, Type::Send as i32, Type::EndTxn as i32],
                "reads of {step}"
            );
        }
    }

    #[test]
    fn a_picked_frame_is_lost_whole_and_the_others_pass_intact() {
        let wire = wire();
        let mut ping = BytesMut::new();
        let mut end = BytesMut::new();
        let cmd = |t: Type| magnetar::proto::pb::BaseCommand {
            r#type: t as i32,
            ..Default::default()
        };
        frame::encode_command(&mut ping, &cmd(Type::Ping)).unwrap();
        frame::encode_command(&mut end, &cmd(Type::EndTxn)).unwrap();
        for step in [1, 3, 7, 4096, wire.len()] {
            let mut s = Frames::default();
            let mut out = Vec::new();
            for c in wire.chunks(step) {
                s.feed(c, Some(&mut out), &mut |k| k == Type::Send as i32);
            }
            assert_eq!(out, [&ping[..], &end[..]].concat(), "reads of {step}");
            // Nothing lost: every byte passes.
            let mut s = Frames::default();
            let mut out = Vec::new();
            for c in wire.chunks(step) {
                s.feed(c, Some(&mut out), &mut |_| false);
            }
            assert_eq!(out, &wire[..], "reads of {step}");
        }
    }
}
