"""``primacy send`` and ``primacy consume``: try a group by hand through its failover URL."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from primacy.cli import codes
from primacy.cli.exits import (
    EXIT_FAILURE,
    EXIT_FEWER_THAN_COUNT,
    EXIT_OK,
    EXIT_REFUSED,
    fail,
)
from primacy.cli.terminal import printable
from primacy.client.consumer import Consumer, Message
from primacy.client.errors import ClientError
from primacy.client.producer import Producer
from primacy.client.url import UrlError, parse_url

URL_HELP = (
    "a broker URL: tcp://HOST:PORT (ssl://HOST:PORT over TLS), or "
    "failover:(tcp://H1:61613,tcp://H2:61613)?OPTIONS "
    "with ActiveMQ's failover options (initialReconnectDelay, maxReconnectDelay, "
    "useExponentialBackOff, backOffMultiplier, maxReconnectAttempts, "
    "startupMaxReconnectAttempts, randomize, timeout); see docs/stomp.md"
)


def register(subparsers: Any) -> None:
    send = subparsers.add_parser(
        "send",
        help="send persistent messages to a queue, each one receipted",
        description="Send messages to a queue of a primacy group and wait for every RECEIPT, "
        "resending with the same message-id across failovers. Prints what was sent, "
        "receipted and resent.",
    )
    send.add_argument("url", help=URL_HELP)
    send.add_argument("destination", help="a queue, /queue/NAME")
    send.add_argument("--count", type=_positive, default=1, help="messages to send (default 1)")
    send.add_argument("--body", default="message {n}", help="body text; {n} is the message number")
    send.add_argument(
        "--window",
        type=_positive,
        default=1,
        help="sends in flight before waiting for receipts (default 1: one at a time)",
    )
    send.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    _add_security_options(send)
    send.set_defaults(func=cmd_send)

    consume = subparsers.add_parser(
        "consume",
        help="receive and acknowledge messages from a queue",
        description="Receive messages from a queue of a primacy group, acknowledging each "
        "once printed, resubscribing across failovers. Prints one line a message, its id "
        "and body separated by a tab, with control characters (newlines and tabs too) and "
        "backslashes written as escapes. Stops after --count messages, or when none "
        "arrived for --idle-timeout-s. The summary counts the acknowledgements the broker "
        "journaled; 'without receipt' ones had their connection fail before the broker "
        "confirmed them, and count because the broker did not deliver them again.",
        epilog=CONSUME_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    consume.add_argument("url", help=URL_HELP)
    consume.add_argument("destination", help="a queue, /queue/NAME")
    consume.add_argument("--count", type=_positive, help="stop after this many (default: no limit)")
    consume.add_argument(
        "--idle-timeout-s",
        type=float,
        default=5.0,
        help="stop when no message arrived for this long (default 5)",
    )
    consume.add_argument("--quiet", action="store_true", help="print only the summary")
    consume.add_argument(
        "--json",
        action="store_true",
        help="JSON lines on stdout: one object a message (message_id, body, redelivered), "
        "then the summary (consumed, ...)",
    )
    _add_security_options(consume)
    consume.set_defaults(func=cmd_consume)


CONSUME_EXIT_CODES = f"""exit codes:
  0  --count messages received, or (without --count) none arrived for --idle-timeout-s
  1  no broker reached, or the connection failed past the failover URL's limits
  2  the URL or the TLS files are refused
  {EXIT_FEWER_THAN_COUNT}  fewer than --count arrived before --idle-timeout-s passed with none
  64 bad command line (an unknown option, a missing argument, a --count not a number)
"""

PASSCODE_VARIABLE = "PRIMACY_STOMP_PASSCODE"


def _add_security_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--login",
        metavar="NAME",
        help=f"log in as NAME (a broker with a users file); the passcode is read from the "
        f"environment variable {PASSCODE_VARIABLE}, never from the command line",
    )
    parser.add_argument(
        "--ca-file",
        type=Path,
        metavar="FILE",
        help="for ssl:// addresses: the PEM CA to trust (default: the system's)",
    )
    parser.add_argument("--cert-file", type=Path, metavar="FILE", help="a client certificate (PEM)")
    parser.add_argument("--key-file", type=Path, metavar="FILE", help="its private key (PEM)")


def _security(args: argparse.Namespace) -> dict[str, Any]:
    """The Failover settings the security options give."""
    return {
        "login": args.login,
        "passcode": os.environ.get(PASSCODE_VARIABLE) if args.login else None,
        "tls_ca_file": args.ca_file,
        "tls_cert_file": args.cert_file,
        "tls_key_file": args.key_file,
    }


def cmd_send(args: argparse.Namespace) -> int:
    try:
        url = parse_url(args.url)
    except UrlError as error:
        return fail(EXIT_REFUSED, str(error))
    try:
        producer = Producer(url, window=args.window, **_security(args))
    except (OSError, ValueError) as error:  # a CA or certificate file that cannot be read
        return fail(EXIT_REFUSED, f"cannot use the TLS files: {error}")
    started = time.monotonic()
    try:
        for number in range(1, args.count + 1):
            producer.send(args.destination, args.body.replace("{n}", str(number)).encode())
        producer.flush()
    except ClientError as error:
        _summary_of_sends(producer, time.monotonic() - started, args.json)
        return fail(EXIT_FAILURE, str(error))
    finally:
        producer.close()
    _summary_of_sends(producer, time.monotonic() - started, args.json)
    return EXIT_OK


def cmd_consume(args: argparse.Namespace) -> int:
    try:
        url = parse_url(args.url)
    except UrlError as error:
        return fail(EXIT_REFUSED, str(error))
    try:
        consumer = Consumer(url, args.destination, **_security(args))
    except (OSError, ValueError) as error:
        return fail(EXIT_REFUSED, f"cannot use the TLS files: {error}")
    acknowledged: list[Message] = []  # receipted: the broker journaled the ACK
    started = time.monotonic()
    try:
        while args.count is None or _acknowledging(consumer, acknowledged) < args.count:
            message = consumer.receive(timeout_s=args.idle_timeout_s)
            if message is None:
                break
            if args.json and not args.quiet:
                shown = {
                    "message_id": message.message_id,
                    "body": message.body.decode(errors="replace"),
                    "redelivered": message.redelivered,
                }
                print(json.dumps(shown))
            elif not args.quiet:
                # Producers choose ids and bodies: escaped (cli/terminal.py), one message a
                # line, and no escape sequence of theirs reaches the operator's terminal.
                body = message.body.decode(errors="replace")
                print(f"{printable(message.message_id)}\t{printable(body)}")
            # A void delivery (its connection failed over) comes again; the receipts come
            # while receiving, up to the consumer's window of ACKs in flight.
            consumer.ack(message, wait=False)
            acknowledged += consumer.take_confirmed()
        consumer.flush()
        acknowledged += consumer.take_confirmed()
        elapsed_s = time.monotonic() - started
    except ClientError as error:
        return fail(EXIT_FAILURE, str(error))
    finally:
        consumer.close()
    # An ACK whose receipt a failover cut off and whose message never came back was journaled
    # (otherwise the broker would have delivered the message again): it counts, and is shown.
    in_doubt = consumer.in_doubt
    counted = acknowledged + in_doubt
    distinct = len({message.message_id for message in counted})
    consumed = len(counted)
    if args.json:
        summary = {
            "consumed": consumed,
            "distinct": distinct,
            "duplicate": consumed - distinct,
            "redelivered": sum(message.redelivered for message in counted),
            "without_receipt": len(in_doubt),
            "failovers": consumer.failover.reconnects,
            "elapsed_s": round(elapsed_s, 3),
        }
        print(json.dumps(summary))
    print(
        f"consumed {consumed} ({distinct} distinct, {consumed - distinct} duplicate, "
        f"{sum(message.redelivered for message in counted)} redelivered, "
        f"{len(in_doubt)} without receipt), failovers {consumer.failover.reconnects}, "
        f"{elapsed_s:.2f} s",
        file=sys.stderr,
    )
    if args.count is not None and consumed < args.count:
        return fail(
            EXIT_FEWER_THAN_COUNT,
            f"{codes.CONSUMED_FEWER} received {consumed} of the {args.count} messages asked "
            f"for: none arrived for {args.idle_timeout_s:g} s (raise --idle-timeout-s to wait "
            "longer)",
        )
    return EXIT_OK


def _acknowledging(consumer: Consumer, acknowledged: list[Message]) -> int:
    """ACKs receipted, in flight, or in doubt (their message not delivered again)."""
    return len(acknowledged) + consumer.unconfirmed + len(consumer.in_doubt)


def _summary_of_sends(producer: Producer, elapsed_s: float, as_json: bool) -> None:
    if as_json:
        summary = {
            "sent": producer.sent,
            "receipted": producer.receipted,
            "resent": producer.resent,
            "unreceipted": len(producer.unreceipted),
            "failovers": producer.failover.reconnects,
            "elapsed_s": round(elapsed_s, 3),
        }
        print(json.dumps(summary))
    print(
        f"sent {producer.sent}, receipted {producer.receipted}, resent {producer.resent}, "
        f"unreceipted {len(producer.unreceipted)}, failovers {producer.failover.reconnects}, "
        f"{elapsed_s:.2f} s",
        file=sys.stderr,
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
