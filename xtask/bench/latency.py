#!/usr/bin/env python3
"""End-to-end latency at a fixed rate, for `cargo xtask bench` (official Pulsar Python client, C++ core).

Two roles, run as two processes around the job under test (pulsar(json) -> pulsar(json), the job copies the
input message's publish time into the output message's event time):

  latency.py produce SERVICE_URL TOPIC --rate 10000 --seconds 60
      Publishes the seed's 4-column JSON order rows at a fixed rate (paced on a monotonic clock in 1 ms
      slots, so the rate holds without bursts) until --seconds pass or SIGTERM. Producer batching: at most
      1 ms delay, so the publish time (set by the client when the batch starts) is at most 1 ms before the send.
      Prints one JSON line: sent, seconds, achieved rate, max lag behind the schedule (ms).

  latency.py probe SERVICE_URL TOPIC --warmup 5 --seconds 30 [--timeout 180] [--time event|publish]
      Subscribes (from the latest message) and, for every message received, records receive time - event
      time (ms; event time has ms resolution, so a latency is overstated by 0-1 ms). The window starts
      --warmup seconds after the first message arrived and lasts --seconds. Prints one JSON line: count,
      p50/p90/p99/max ms, received rate in the window, and count/p50/max per second of the window. Exits 1 (and says why on stderr) if nothing arrived
      within --timeout seconds or messages had no event time.
"""
import argparse
import json
import math
import signal
import sys
import time

import pulsar

STATUSES = ["CREATED", "PAID", "SHIPPED", "DELIVERED"]


def order_row(i):
    return json.dumps(
        {
            "order_id": i,
            "order_product_id": (i * 7919) % 100000 + 1,
            "order_customer_id": (i * 104729) % 1000000 + 1,
            "order_status": STATUSES[i % 4],
        },
        separators=(",", ":"),
    ).encode()


def produce(args):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    client = pulsar.Client(args.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    producer = client.create_producer(
        args.topic,
        batching_enabled=True,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=1,
        block_if_queue_full=True,
        max_pending_messages=100000,
    )
    sent = 0
    max_lag = 0.0
    t0 = time.monotonic()
    end = t0 + args.seconds
    while not stop:
        now = time.monotonic()
        if now >= end:
            break
        due = int((now - t0) * args.rate)  # messages that should have been sent by now
        if due <= sent:
            time.sleep(min(0.001, (sent + 1) / args.rate - (now - t0)))
            continue
        max_lag = max(max_lag, (now - t0 - sent / args.rate) * 1000.0)
        while sent < due:
            sent += 1
            producer.send_async(order_row(sent), None, partition_key=str(sent))
    producer.flush()
    seconds = time.monotonic() - t0
    print(json.dumps({"sent": sent, "seconds": round(seconds, 3), "rate": round(sent / seconds, 1), "max_lag_ms": round(max_lag, 1)}))
    sys.stdout.flush()
    producer.close()
    client.close()


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    # nearest rank
    k = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[k - 1]


def probe(args):
    client = pulsar.Client(args.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    consumer = client.subscribe(
        args.topic,
        f"latency-probe-{int(time.time() * 1000)}",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Latest,
        receiver_queue_size=10000,
    )
    # Tell the caller the subscription exists (it starts the producer only then).
    print("ready", file=sys.stderr, flush=True)
    latencies = []
    per_second = {}  # second of the window -> latencies, to see spikes (checkpoints, GC, a starved producer)
    missing_event_time = 0
    first = None
    deadline = time.time() + args.timeout
    while True:
        now = time.time()
        if first is None and now > deadline:
            print(f"probe: no message on {args.topic} within {args.timeout} s", file=sys.stderr)
            sys.exit(1)
        if first is not None and now >= first + args.warmup + args.seconds:
            break
        try:
            msg = consumer.receive(timeout_millis=200)
        except pulsar.Timeout:
            continue
        received = time.time() * 1000.0
        if first is None:
            first = received / 1000.0
        if received / 1000.0 < first + args.warmup:
            continue
        event = msg.event_timestamp() if args.time == "event" else msg.publish_timestamp()
        if event <= 0:
            missing_event_time += 1
            continue
        latencies.append(received - event)
        second = int(received / 1000.0 - first - args.warmup)
        per_second.setdefault(second, []).append(received - event)
    consumer.unsubscribe()  # nothing was acknowledged: drop the subscription with its backlog
    client.close()
    if missing_event_time and not latencies:
        print(f"probe: {missing_event_time} messages on {args.topic} had no event time", file=sys.stderr)
        sys.exit(1)
    latencies.sort()
    result = {
        "count": len(latencies),
        "window_seconds": args.seconds,
        "rate": round(len(latencies) / args.seconds, 1),
        "missing_event_time": missing_event_time,
        "p50_ms": percentile(latencies, 50),
        "p90_ms": percentile(latencies, 90),
        "p99_ms": percentile(latencies, 99),
        "max_ms": latencies[-1] if latencies else None,
        "per_second": [
            {"s": k, "count": len(v), "p50_ms": round(percentile(sorted(v), 50), 1), "max_ms": round(max(v), 1)}
            for k, v in sorted(per_second.items())
        ],
    }
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    roles = parser.add_subparsers(dest="role", required=True)
    p = roles.add_parser("produce")
    p.add_argument("service_url")
    p.add_argument("topic")
    p.add_argument("--rate", type=float, default=10000.0)
    p.add_argument("--seconds", type=float, default=60.0)
    q = roles.add_parser("probe")
    q.add_argument("service_url")
    q.add_argument("topic")
    q.add_argument("--warmup", type=float, default=5.0)
    q.add_argument("--seconds", type=float, default=30.0)
    q.add_argument("--timeout", type=float, default=180.0)
    q.add_argument("--time", choices=["event", "publish"], default="event",
                   help="publish: measure against the message's own publish time (no job in between: the baseline)")
    args = parser.parse_args()
    produce(args) if args.role == "produce" else probe(args)


if __name__ == "__main__":
    main()
