"""Protobuf messages through the official Apache Pulsar Python client, built and read with protobuf's
Python package and classes generated (by grpcio-tools' protoc) from tests/golden/protobuf/proto.

  protobuf_interop.py produce SERVICE_URL TOPIC COUNT
      Writes COUNT `pulsar_connect.golden.AllTypes` messages (message i: f_int32 = i, f_string, f_enum,
      f_inner, f_counts, f_uint32 = 4294967295 - i) through a batching producer; prints each as `@@` JSON.
  protobuf_interop.py consume SERVICE_URL TOPIC COUNT TIMEOUT_SECONDS
      Reads COUNT messages from the earliest position, parses each as AllTypes and prints its fields
      (`@@` JSON, protobuf's own JSON mapping with field names as declared).
"""

import json
import os
import sys
import tempfile

import pulsar
from google.protobuf import json_format

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "golden", "protobuf", "proto")
LOGGER = pulsar.FileLogger(pulsar.LoggerLevel.Info, "/dev/stderr")


def golden3():
    import grpc_tools
    from grpc_tools import protoc

    out = tempfile.mkdtemp()
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    if protoc.main(["protoc", f"-I{PROTO}", f"-I{include}", f"--python_out={out}", "golden3.proto"]) != 0:
        raise SystemExit("protoc failed")
    sys.path.insert(0, out)
    import golden3_pb2

    return golden3_pb2


def emit(record):
    sys.stdout.write("@@" + json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


def as_json(msg):
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def produce(service_url, topic, count):
    g = golden3()
    client = pulsar.Client(service_url, logger=LOGGER)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=20,
                                      batching_max_publish_delay_ms=10)
    messages = []
    for i in range(count):
        m = g.AllTypes(
            f_int32=i,
            f_string=f"python-{i}-ünï",
            f_enum=[g.RED, g.GREEN, g.BLUE][i % 3],
            f_inner=g.Inner(a=i * 2, b=f"inner-{i}", c=[i, -i]),
            f_uint32=4294967295 - i,
        )
        m.f_counts["n"] = i
        m.f_counts["twice"] = 2 * i
        producer.send_async(m.SerializeToString(), None)
        messages.append(m)
    producer.flush()
    client.close()
    for m in messages:
        emit(as_json(m))


def consume(service_url, topic, count, timeout):
    g = golden3()
    client = pulsar.Client(service_url, logger=LOGGER)
    consumer = client.subscribe(topic, "protobuf-interop", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=pulsar.InitialPosition.Earliest)
    got = 0
    while got < count:
        msg = consumer.receive(timeout_millis=timeout * 1000)
        consumer.acknowledge(msg)
        emit(as_json(g.AllTypes.FromString(msg.data())))
        got += 1
    client.close()


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "produce":
        produce(args[0], args[1], int(args[2]))
    elif cmd == "consume":
        consume(args[0], args[1], int(args[2]), int(args[3]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
