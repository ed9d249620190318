"""Writes the messages of a conformance case through the official Apache Pulsar Python client.

  produce.py SERVICE_URL SPEC_JSON

SPEC_JSON: {"schema": "bytes" | "string", "messages": [MESSAGE, ...]}
MESSAGE:   {"topic": "...", "value": "text" | "value_hex": "7fffffff",
            "key": "...", "properties": {...}, "event_time": ms, "sequence_id": n}   (all but topic optional)

Batching is off, so every message is its own entry and its id is `ledger:entry:partition`. Prints one
`@@`-prefixed JSON line per message: {"index": i, "message_id": "ledger:entry:partition"}.
"""

import json
import sys

import pulsar
from pulsar.schema import StringSchema

# The C++ core logs to stdout unless given a logger, and from its own threads: a log line could land
# between a result and its newline. Its logs go to stderr, through its own file logger (a Python
# `logging` logger is called back from those threads, also while the interpreter shuts down).
LOGGER = pulsar.FileLogger(pulsar.LoggerLevel.Info, "/dev/stderr")


def main(service_url, spec):
    client = pulsar.Client(service_url, logger=LOGGER)
    producers = {}
    try:
        for index, message in enumerate(spec["messages"]):
            topic = message["topic"]
            if topic not in producers:
                kwargs = {"batching_enabled": False}
                if spec.get("schema") == "string":
                    kwargs["schema"] = StringSchema()
                producers[topic] = client.create_producer(topic, **kwargs)
            producer = producers[topic]
            if "value_hex" in message:
                content = bytes.fromhex(message["value_hex"])
            elif spec.get("schema") == "string":
                content = message.get("value", "")
            else:
                content = message.get("value", "").encode("utf-8")
            send = {}
            if "key" in message:
                send["partition_key"] = message["key"]
            if "properties" in message:
                send["properties"] = message["properties"]
            if "event_time" in message:
                send["event_timestamp"] = message["event_time"]
            if "sequence_id" in message:
                send["sequence_id"] = message["sequence_id"]
            msg_id = producer.send(content, **send)
            record = {
                "index": index,
                "message_id": f"{msg_id.ledger_id()}:{msg_id.entry_id()}:{msg_id.partition()}",
            }
            # Results carry a marker, written in one call.
            sys.stdout.write("@@" + json.dumps(record) + "\n")
            sys.stdout.flush()
    finally:
        for producer in producers.values():
            producer.close()
        client.close()


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
