# SPDX-License-Identifier: MIT
# ZooKeeper frames from `tcpdump -n -tt -x` text of a capture on loopback (capture.sh):
# frames(lines) yields (time, source port, destination port, frame bytes) for each whole
# frame (4-byte length, then the body: xid first) in each packet's payload. A frame split
# across two packets is not decoded (rare: requests and answers are small).
import re

_HEADER = re.compile(r"(\d+\.\d+) IP 127\.0\.0\.1\.(\d+) > 127\.0\.0\.1\.(\d+):")


def _split(t, src, dst, hexdump):
    b = bytes.fromhex(hexdump)
    if len(b) <= 40:
        return
    ihl = (b[0] & 15) * 4
    payload = b[ihl + (b[ihl + 12] >> 4) * 4:]
    o = 0
    while o + 12 <= len(payload):
        n = int.from_bytes(payload[o:o + 4], "big")
        if n < 8 or n > 2_000_000:
            return
        yield t, src, dst, payload[o:o + 4 + n]
        o += 4 + n


def frames(lines):
    cur, hexdump = None, ""
    for line in lines:
        if not line.startswith("\t"):
            if cur:
                yield from _split(*cur, hexdump)
            m = _HEADER.match(line)
            cur, hexdump = ((float(m.group(1)), m.group(2), m.group(3)) if m else None), ""
        elif cur:
            hexdump += "".join(line.split(":", 1)[1].split()[:8])
    if cur:
        yield from _split(*cur, hexdump)


def xid(frame):
    return int.from_bytes(frame[4:8], "big", signed=True)
