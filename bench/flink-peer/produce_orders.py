#!/usr/bin/env python3
"""Pre-produce the seed's 4-column order rows as JSON to a Pulsar topic with the official client (C++ core).

Deterministic content: row i = {"order_id": i, "order_product_id": (i * 7919) % 100000 + 1,
"order_customer_id": (i * 104729) % 1000000 + 1, "order_status": one of 4 statuses}; key = str(order_id).
Usage: produce_orders.py SERVICE_URL TOPIC [ROWS=200000]
Run with /work/main/.venv/bin/python (pulsar-client installed there).
"""
import json
import sys
import time

import pulsar

STATUSES = ["CREATED", "PAID", "SHIPPED", "DELIVERED"]


def main():
    service_url, topic = sys.argv[1], sys.argv[2]
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=5,
        block_if_queue_full=True,
        max_pending_messages=10000,
    )
    t0 = time.time()
    for i in range(1, rows + 1):
        row = {
            "order_id": i,
            "order_product_id": (i * 7919) % 100000 + 1,
            "order_customer_id": (i * 104729) % 1000000 + 1,
            "order_status": STATUSES[i % 4],
        }
        producer.send_async(json.dumps(row, separators=(",", ":")).encode(), None, partition_key=str(i))
    producer.flush()
    dt = time.time() - t0
    print(f"produced {rows} rows to {topic} in {dt:.1f} s ({rows / dt:.0f} msg/s)")
    producer.close()
    client.close()


if __name__ == "__main__":
    main()
