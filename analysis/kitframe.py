"""The course kit's request frame, the one writer of it: every request is exactly FRAME
(the kit's COM_BUFF_SIZE, 100) bytes, "pos-is_read-text" NUL-terminated, and the server
reads no further than the NUL. Used by the grader's kit load, the soak benchmark and the
fuzz targets' seed corpus."""

FRAME = 100  # COM_BUFF_SIZE


def frame(text: str | bytes, after: bytes = b"") -> bytes:
    """`text` (a str as UTF-8) cut to FRAME - 1 bytes and NUL-terminated, then `after` (bytes
    past the NUL, which the kit's server must ignore: its client leaves garbage there), padded
    with NULs and cut to exactly FRAME bytes."""
    raw = text.encode() if isinstance(text, str) else bytes(text)
    body = raw[:FRAME - 1] + b"\0" + after
    return (body + b"\0" * FRAME)[:FRAME]

