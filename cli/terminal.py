"""Text the CLI prints from the share or from a node, made safe for the operator's terminal.

Anyone who can write the share can put any string in a registry entry, a holder record
or a journal record; printed as it is, an escape sequence in it reaches the terminal
(issue 27: an OSC sequence in ``nodes/*.json`` retitled the window of whoever ran
``primacy cluster``; others move the cursor, rewrite earlier lines or, on some
terminals, answer back into the input). Every share-derived value the CLI prints as
text goes through ``printable`` first; JSON output is escaped by ``json.dumps`` already.
"""

from __future__ import annotations


def printable(value: object) -> str:
    """``str(value)`` with every character ``str.isprintable`` refuses written as an escape.

    That is every control character (ESC, CR, BEL, the C1 range with its one-byte CSI),
    and the format and separator characters that reorder or hide text (U+202E, U+2028),
    as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``. A backslash is doubled, so an escape
    shown can always be told from one that was in the text.
    """
    text = str(value)
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char.isprintable():
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
