"""Pure shaping of protocol answers into the rows the console's pages show (no I/O).

Names follow what Kafka's tools print: group states as DescribeGroups gives them
(``Stable``, ``Empty``, ``PreparingRebalance``), errors by Kafka's error names, ACLs in
kafka-acls.sh's words, SCRAM mechanisms as ``SCRAM-SHA-256``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from weir.console.admin import error_name
from weir.protocol.errors import KafkaError
from weir.records.batch import iter_headers
from weir.records.filter import decode_raw_records
from weir.records.records import decode_varint

MAX_SHOWN_BYTES = 16 * 1024  # per key or value handed to the page


# -- topics -----------------------------------------------------------------------------------


def log_dir_rows(response: Any) -> dict[str, Any]:
    """A broker's DescribeLogDirs answer: each dir (size, total and usable bytes, error) and
    each replica's size as ``[topic, partition, bytes, is_future]``."""
    dirs, sizes = [], []
    for result in response.results:
        used = 0
        for t in result.topics:
            for p in t.partitions:
                size = int(p.partition_size)
                used += size
                sizes.append([t.name, int(p.partition_index), size, bool(p.is_future_key)])
        dirs.append({"path": result.log_dir, "error": error_name(result.error_code),
                     "size_bytes": used, "total_bytes": int(result.total_bytes),
                     "usable_bytes": int(result.usable_bytes)})
    dirs.sort(key=lambda d: d["path"])
    return {"dirs": dirs, "sizes": sizes}


def add_offsets_and_sizes(topics: list[dict[str, Any]],
                          starts: Mapping[tuple[str, int], int | str],
                          ends: Mapping[tuple[str, int], int | str],
                          log_dirs: Mapping[int, Mapping[str, Any]]) -> None:
    """Per partition: log start and end offsets (or the error reading them), its record
    count (end - start: compacted or aborted records counted too, as Kafka UI does) and
    bytes on disk per replica; per topic: the sums (bytes over every replica)."""
    sizes: dict[tuple[str, int], dict[int, int]] = {}
    for broker, doc in log_dirs.items():
        for topic, partition, size, future in doc.get("sizes", []):
            if not future:
                sizes.setdefault((topic, partition), {})[int(broker)] = size
    for t in topics:
        records = size = 0
        known = True
        for p in t["partitions"]:
            tp = (p["topic"], p["partition"])
            start, end = starts.get(tp), ends.get(tp)
            p["log_start_offset"], p["log_end_offset"] = start, end
            p["records"] = end - start if isinstance(start, int) and isinstance(end, int) \
                else None
            p["offsets_error"] = next((v for v in (start, end) if isinstance(v, str)), None)
            p["replica_bytes"] = {str(b): s for b, s in sorted(sizes.get(tp, {}).items())}
            p["size_bytes"] = sizes.get(tp, {}).get(p["leader"])
            if p["records"] is None:
                known = False
            else:
                records += p["records"]
            size += sum(sizes.get(tp, {}).values())
        t["records"] = records if known else None
        t["size_bytes"] = size
        t["replication_factor"] = max((len(p["replicas"]) for p in t["partitions"]), default=0)


# -- groups -----------------------------------------------------------------------------------


def decode_assignment(data: bytes | None) -> list[tuple[str, int]]:
    """The partitions of a consumer-protocol assignment (ConsumerProtocolAssignment: version
    int16, [topic string, [partition int32]], user data); [] when it is not one."""
    if not data:
        return []
    out = []
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = bytes(data[pos:pos + length]).decode()
            pos += length
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(max(n, 0)):
                (partition,) = struct.unpack_from(">i", data, pos)
                pos += 4
                out.append((topic, partition))
    except (struct.error, UnicodeDecodeError):
        return []
    return sorted(out)


def member_rows(desc: Any) -> list[dict[str, Any]]:
    """A described group's members: id, client id, host, instance id, assignment."""
    rows = []
    for m in desc.members:
        assigned = decode_assignment(m.member_assignment) \
            if desc.protocol_type == "consumer" else []
        rows.append({"member_id": m.member_id, "client_id": m.client_id,
                     "host": m.client_host, "instance_id": m.group_instance_id,
                     "assignment": [f"{t}-{p}" for t, p in assigned]})
    return sorted(rows, key=lambda r: (r["client_id"], r["member_id"]))


def group_row(desc: Any, committed: Mapping[tuple[str, int], int],
              ends: Mapping[tuple[str, int], int | str]) -> dict[str, Any]:
    """A group as the list and its page show it: state, members, lag per partition (log
    end minus committed, as kafka-consumer-groups.sh) and the total."""
    from weir.console.collect import group_lag_rows

    owners = {}
    for m in desc.members:
        if desc.protocol_type == "consumer":
            for tp in decode_assignment(m.member_assignment):
                owners[tp] = m.client_id or m.member_id
    numeric = {tp: v for tp, v in ends.items() if isinstance(v, int)}
    rows = group_lag_rows(committed, numeric, owners)
    return {"group": desc.group_id, "state": desc.group_state,
            "protocol_type": desc.protocol_type, "protocol": desc.protocol_data,
            "members": len(desc.members), "error": None, "partitions": rows,
            "topics": sorted({r["topic"] for r in rows}),
            "total_lag": sum(r["lag"] for r in rows if r["lag"] is not None)}


# -- security ---------------------------------------------------------------------------------


def acl_rows(response: Any) -> list[dict[str, str]]:
    """DescribeAcls bindings in kafka-acls.sh's words."""
    from weir.security.acls import AclOperation, PatternType, PermissionType, ResourceType

    def name(enum: Any, value: int) -> str:
        try:
            return enum(int(value)).name
        except ValueError:
            return str(value)

    rows = [{"resource_type": name(ResourceType, r.resource_type),
             "resource_name": r.resource_name,
             "pattern_type": name(PatternType, r.pattern_type),
             "principal": a.principal, "host": a.host,
             "operation": name(AclOperation, a.operation),
             "permission": name(PermissionType, a.permission_type)}
            for r in response.resources for a in r.acls]
    return sorted(rows, key=lambda r: tuple(r.values()))


SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


def scram_rows(response: Any) -> list[dict[str, Any]]:
    return sorted(({"user": r.user, "error": error_name(r.error_code),
                    "mechanisms": [{"mechanism": SCRAM_MECHANISMS.get(int(c.mechanism),
                                                                      str(c.mechanism)),
                                    "iterations": int(c.iterations)}
                                   for c in r.credential_infos]}
                   for r in response.results), key=lambda r: r["user"])


# -- records -----------------------------------------------------------------------------------


def _shown(data: bytes | None) -> dict[str, Any]:
    """A key or value for the page: its text (UTF-8, else None), hex, size, and whether it
    was cut at MAX_SHOWN_BYTES."""
    if data is None:
        return {"text": None, "hex": None, "size": None, "truncated": False}
    cut = bytes(data[:MAX_SHOWN_BYTES])
    try:
        text: str | None = cut.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"text": text, "hex": cut.hex(), "size": len(data),
            "truncated": len(data) > MAX_SHOWN_BYTES}


def _headers(tail: bytes) -> list[dict[str, Any]]:
    """The headers after a record's key and value (``tail``: key length, key, value
    length, value, header count, headers)."""
    pos = 0
    for _ in range(2):
        length, pos = decode_varint(tail, pos)
        pos += max(length, 0)
    count, pos = decode_varint(tail, pos)
    out = []
    for _ in range(max(count, 0)):
        klen, pos = decode_varint(tail, pos)
        key = bytes(tail[pos:pos + klen]).decode("utf-8", "replace")
        pos += klen
        vlen, pos = decode_varint(tail, pos)
        value = None if vlen < 0 else bytes(tail[pos:pos + vlen])
        pos += max(vlen, 0)
        out.append({"key": key, **_shown(value)})
    return out


def decode_records(buf: bytes, min_offset: int, partition: int
                   ) -> tuple[list[dict[str, Any]], int]:
    """The records at or after ``min_offset`` in a Fetch answer's record batches (control
    batches skipped, compressed ones opened) and the offset after the last complete batch.
    A corrupt batch raises ValueError naming CORRUPT_MESSAGE."""
    rows = []
    next_offset = min_offset
    try:
        for header in iter_headers(buf):
            next_offset = max(next_offset, header.next_offset)
            if header.magic != 2 or header.is_control:
                continue
            for record in decode_raw_records(buf, header):
                if record.offset < min_offset:
                    continue
                rows.append({"partition": partition, "offset": record.offset,
                             "timestamp": record.timestamp,
                             "timestamp_type": "LogAppendTime" if header.timestamp_type
                             else "CreateTime",
                             "key": _shown(record.key), "value": _shown(record.value),
                             "headers": _headers(record.tail)})
    except (KafkaError, IndexError) as exc:
        raise ValueError(f"CORRUPT_MESSAGE: {exc}") from None
    return rows, next_offset
