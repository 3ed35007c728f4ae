"""PDF stream data decoded within a byte budget, a piece at a time.

pypdf decodes a stream whole before anyone can look at its size (up to 75 MB each, a page
may hold any number of them) and keeps what it decoded. Here a stream's filters run with
a cap on what they may produce: FlateDecode inflates with ``zlib.decompressobj`` and
``max_length``, LZW and RunLength are decoded here with the cap checked as they go, and
the first byte past the cap ends the decoding (``Over``), having cost no more than the cap.
The data decoded is what pypdf would have decoded (its recovery of a damaged FlateDecode
stream included), so the text extracted from it is the same.
"""

from __future__ import annotations

import zlib
from typing import Any

#: Compressed bytes handed to zlib at a time.
CHUNK = 64 * 1024
#: Bytes of a damaged FlateDecode stream retried one at a time (pypdf's bound).
RECOVERY_BYTES = 5_000_000


class Over(Exception):
    """The stream decodes to more than the cap allowed."""


class Unreadable(Exception):
    """The stream cannot be decoded (an unknown filter, damaged data); the message says
    why in a few words."""


def decoded(stream: Any, cap: int) -> bytes:
    """``stream``'s data through its filters, at most ``cap`` bytes (``Over`` past it)."""
    from pypdf.generic import ArrayObject, DictionaryObject

    data: bytes = stream._data
    filters = _resolved(stream.get("/Filter"))
    if filters is None:
        filters = []
    elif not isinstance(filters, ArrayObject):
        filters = [filters]
    parms = _resolved(stream.get("/DecodeParms"))
    if not isinstance(parms, (list, ArrayObject)):
        parms = [parms] * len(filters)
    if len(filters) > 16:
        raise Unreadable(f"{len(filters)} filters on one stream")
    if len(data) > cap and not filters:
        raise Over
    for index, name in enumerate(filters):
        name = str(_resolved(name))
        parm = _resolved(parms[index]) if index < len(parms) else None
        if not isinstance(parm, DictionaryObject):
            parm = DictionaryObject()
        data = _decode(name, data, parm, cap)
        if len(data) > cap:
            raise Over
    return data


def _resolved(value: Any) -> Any:
    return value.get_object() if hasattr(value, "get_object") else value


def _decode(name: str, data: bytes, parm: Any, cap: int) -> bytes:
    from pypdf.filters import ASCII85Decode, ASCIIHexDecode, FlateDecode, LZWDecode

    if name in ("/FlateDecode", "/Fl"):
        out = inflate(data, cap)
        if _predicted(parm):
            # A predictor leaves no more than it is given: pypdf's decoding, now bounded.
            out = FlateDecode.decode(data, parm)
        return out
    if name in ("/LZWDecode", "/LZW"):
        out = lzw(data, cap)
        return LZWDecode.decode(data, parm) if _predicted(parm) else out
    if name in ("/RunLengthDecode", "/RL"):
        return run_length(data, cap)
    # These two give fewer bytes than they are given.
    if name in ("/ASCIIHexDecode", "/AHx"):
        return bytes(ASCIIHexDecode.decode(data))
    if name in ("/ASCII85Decode", "/A85"):
        return bytes(ASCII85Decode.decode(data))
    if name == "/Crypt" and not ("/Name" in parm or "/Type" in parm):
        return data  # the identity crypt filter (the reader has decrypted the data)
    raise Unreadable(f"the filter {name} is not read in a page's content")


def _predicted(parm: Any) -> bool:
    try:
        return int(parm.get("/Predictor", 1)) > 1
    except (TypeError, ValueError):
        return False


def inflate(data: bytes, cap: int) -> bytes:
    """zlib-inflated ``data``, pypdf's way (a damaged stream recovered as pypdf does),
    never more than ``cap`` bytes produced."""
    try:
        return _inflate(data, cap)
    except zlib.error:
        pass
    # Some writers add bytes after the end of the stream: cut up to 8 of them.
    for cut in range(1, min(9, len(data))):
        try:
            return _inflate(data[:-cut], cap)
        except zlib.error:
            pass
    # Last, pypdf's byte-at-a-time recovery, zlib or gzip header.
    decompressor = zlib.decompressobj(zlib.MAX_WBITS | 32)
    out = bytearray()
    for index in range(len(data)):
        if index >= RECOVERY_BYTES:
            raise Unreadable("a damaged FlateDecode stream")
        try:
            out += decompressor.decompress(data[index : index + 1], cap + 1 - len(out))
        except zlib.error:
            continue
        if len(out) > cap:
            raise Over
    return bytes(out)


def _inflate(data: bytes, cap: int) -> bytes:
    decompressor = zlib.decompressobj()
    out: list[bytes] = []
    size = 0
    for start in range(0, len(data), CHUNK):
        piece = data[start : start + CHUNK]
        while piece:
            chunk = decompressor.decompress(piece, cap + 1 - size)
            size += len(chunk)
            if size > cap:
                raise Over
            out.append(chunk)
            piece = decompressor.unconsumed_tail
        if decompressor.eof:
            break
    return b"".join(out)


def run_length(data: bytes, cap: int) -> bytes:
    """RunLengthDecode, as pypdf decodes it, never more than ``cap`` bytes produced."""
    out: list[bytes] = []
    size = index = 0
    while index < len(data):
        length = data[index]
        index += 1
        if length == 128:
            break
        if length < 128:
            piece = data[index : index + length + 1]
            index += length + 1
        else:
            if index >= len(data):
                break
            piece = data[index : index + 1] * (257 - length)
            index += 1
        size += len(piece)
        if size > cap:
            raise Over
        out.append(piece)
    return b"".join(out)


_CLEAR, _EOD = 256, 257


def lzw(data: bytes, cap: int) -> bytes:
    """LZWDecode (early change), as pypdf decodes it, never more than ``cap`` bytes."""
    table: list[bytes] = [bytes([i]) for i in range(256)] + [b"", b""]
    out: list[bytes] = []
    size = 0
    width, buffered, nbits, pointer = 9, 0, 0, 0
    old = _CLEAR

    def code() -> int:
        nonlocal buffered, nbits, pointer
        while nbits < width:
            if pointer >= len(data):
                return _EOD
            buffered = ((buffered << 8) | data[pointer]) & 0xFFFFFFFF
            pointer += 1
            nbits += 8
        nbits -= width
        return (buffered >> nbits) & ((1 << width) - 1)

    def add(entry: bytes) -> None:
        nonlocal width
        if len(table) > 4095:
            return
        table.append(entry)
        if len(table) in (511, 1023, 2047):
            width += 1

    while True:
        found = code()
        if found == _EOD:
            break
        if found == _CLEAR:
            del table[258:]
            width = 9
            found = code()
            if found == _EOD:
                break
            entry = table[found] if found < len(table) else b""
            old = found
        elif found < len(table):
            entry = table[found]
            if old != _CLEAR:
                add((table[old] if old < len(table) else b"") + entry[:1])
            old = found
        else:
            base = table[old] if old < len(table) else b""
            if not base:
                raise Unreadable("a damaged LZWDecode stream")
            entry = base + base[:1]
            add(entry)
            old = found
        size += len(entry)
        if size > cap:
            raise Over
        out.append(entry)
    return b"".join(out)
