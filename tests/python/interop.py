"""Interop driver for the official Apache Pulsar Python client (C++ core).

  interop.py produce SERVICE_URL TOPIC COUNT
      Writes COUNT messages with keys, properties and event times, a quarter each through a batching
      LZ4, ZLIB, ZSTD and SNAPPY producer. Prints one `@@`-prefixed JSON line per message it wrote
      (payload, key, properties, event_time, message_id).
  interop.py produce-keyed SERVICE_URL TOPIC MESSAGES_JSON
      Writes the messages of MESSAGES_JSON (a list of [key, payload] strings) in order through a batching
      ZSTD producer; the client sets keys as text (it has no `keyBytes`). Prints each as written.
  interop.py produce-one SERVICE_URL TOPIC
      Writes one message through a batching producer (an entry holding a batch of one) and prints it.
  interop.py produce-big SERVICE_URL TOPIC SIZES_JSON [COMPRESSION]
      Writes one json message `{"id": i, "payload": "xx..."}` per size of SIZES_JSON (the payload string
      that long) through a producer with chunking on and batching off, so a message above the broker's
      `maxMessageSize` goes in chunks. Prints each with its id (`chunked`: it went in several). With
      COMPRESSION (LZ4, ZLIB, ZSTD, SNAPPY) the producer compresses and the payloads are random hex.
  interop.py consume-sizes SERVICE_URL TOPIC COUNT TIMEOUT_SECONDS
      Reads COUNT json messages `{"id": .., "payload": ..}` from the earliest position through an
      Exclusive subscription (chunked messages arrive whole) and prints each one's id, payload length
      and message id.
  interop.py consume SERVICE_URL TOPIC COUNT TIMEOUT_SECONDS
      Reads COUNT messages from the earliest position through a Shared subscription and prints one
      `@@`-prefixed JSON line per message (with its publish time and the local time it was received).
"""

import base64
import json
import os
import sys
import time

import pulsar

# The C++ core logs to stdout unless given a logger, and from its own threads: a log line could land
# between a result and its newline. Its logs go to stderr, through its own file logger (a Python
# `logging` logger is called back from those threads, also while the interpreter shuts down).
LOGGER = pulsar.FileLogger(pulsar.LoggerLevel.Info, "/dev/stderr")


def emit(record):
    """One result line, marked, written in one call."""
    sys.stdout.write("@@" + json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def produce(service_url, topic, count):
    client = pulsar.Client(service_url, logger=LOGGER)
    codecs = [pulsar.CompressionType.LZ4, pulsar.CompressionType.ZLib, pulsar.CompressionType.ZSTD,
              pulsar.CompressionType.SNAPPY]
    quarter = count // len(codecs)
    plans = [(c, range(n * quarter, count if n == len(codecs) - 1 else (n + 1) * quarter))
             for n, c in enumerate(codecs)]
    for compression, indexes in plans:
        producer = client.create_producer(
            topic,
            compression_type=compression,
            batching_enabled=True,
            batching_max_messages=50,
            batching_max_publish_delay_ms=20,
        )
        sent = []

        def callback(res, msg_id, i):
            if res != pulsar.Result.Ok:
                raise SystemExit(f"send {i} failed: {res}")
            sent.append((i, str(msg_id), base64.b64encode(msg_id.serialize()).decode()))

        for i in indexes:
            payload = f"python-{i}-" + ("x" * (i % 7)) + "ünïcødé"
            producer.send_async(
                payload.encode("utf-8"),
                lambda res, msg_id, i=i: callback(res, msg_id, i),
                partition_key=f"key-{i}",
                properties={"index": str(i), "origin": "python", "compression": str(compression)},
                event_timestamp=1_700_000_000_000 + i,
            )
        producer.flush()
        producer.close()
        for i, msg_id, id_bytes in sorted(sent):
            emit({
                "payload": f"python-{i}-" + ("x" * (i % 7)) + "ünïcødé",
                "key": f"key-{i}",
                "properties": {"index": str(i), "origin": "python", "compression": str(compression)},
                "event_time": 1_700_000_000_000 + i,
                "message_id": msg_id,
                "message_id_bytes": id_bytes,
            })
    client.close()


def produce_keyed(service_url, topic, messages):
    client = pulsar.Client(service_url, logger=LOGGER)
    producer = client.create_producer(
        topic,
        compression_type=pulsar.CompressionType.ZSTD,
        batching_enabled=True,
        batching_max_messages=20,
        batching_max_publish_delay_ms=20,
    )
    failed = []

    def callback(res, _msg_id):
        if res != pulsar.Result.Ok:
            failed.append(str(res))

    for key, payload in messages:
        producer.send_async(payload.encode("utf-8"), callback, partition_key=key)
    producer.flush()
    if failed:
        raise SystemExit(f"{len(failed)} send(s) failed, first: {failed[0]}")
    for key, payload in messages:
        emit({"key": key, "payload": payload})
    producer.close()
    client.close()


def produce_one(service_url, topic):
    client = pulsar.Client(service_url, logger=LOGGER)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=10)
    msg_id = producer.send(b"alone in its batch", partition_key="solo", properties={"p": "1"})
    emit({"payload": "alone in its batch", "key": "solo", "message_id": str(msg_id)})
    producer.close()
    client.close()


def produce_big(service_url, topic, sizes, compression=None):
    client = pulsar.Client(service_url, logger=LOGGER)
    kwargs = {}
    if compression:
        kwargs["compression_type"] = getattr(pulsar.CompressionType, compression)
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False, **kwargs)
    for i, size in enumerate(sizes):
        # Compressed: random hex digits, which compress to about half, so a big one still needs chunks.
        text = os.urandom(size // 2 + 1).hex()[:size] if compression else "x" * size
        msg_id = producer.send(json.dumps({"id": i, "payload": text}).encode())
        emit({"id": i, "size": size, "message_id": str(msg_id), "chunked": ";" in str(msg_id)})
    producer.close()
    client.close()


def consume_sizes(service_url, topic, count, timeout_s):
    client = pulsar.Client(service_url, logger=LOGGER)
    consumer = client.subscribe(topic, "python-sizes", consumer_type=pulsar.ConsumerType.Exclusive,
                                initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(count):
        msg = consumer.receive(timeout_millis=int(timeout_s * 1000))
        row = json.loads(msg.data())
        emit({"id": row["id"], "size": len(row["payload"]), "message_id": str(msg.message_id())})
        consumer.acknowledge(msg)
    client.close()


def consume(service_url, topic, count, timeout_s):
    client = pulsar.Client(service_url, logger=LOGGER)
    consumer = client.subscribe(
        topic,
        "python-interop",
        consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    for _ in range(count):
        msg = consumer.receive(timeout_millis=int(timeout_s * 1000))
        emit({
            "payload": msg.data().decode("utf-8"),
            "key": msg.partition_key(),
            "properties": msg.properties(),
            "event_time": msg.event_timestamp(),
            "publish_time": msg.publish_timestamp(),
            "received_ms": int(time.time() * 1000),
            "topic": msg.topic_name(),
            "message_id": str(msg.message_id()),
        })
        consumer.acknowledge(msg)
    consumer.close()
    client.close()


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "produce":
        produce(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "produce-keyed":
        produce_keyed(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
    elif cmd == "produce-one":
        produce_one(sys.argv[2], sys.argv[3])
    elif cmd == "produce-big":
        produce_big(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]),
                    sys.argv[5] if len(sys.argv) > 5 else None)
    elif cmd == "consume-sizes":
        consume_sizes(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    elif cmd == "consume":
        consume(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    else:
        raise SystemExit(f"unknown command {cmd}")
