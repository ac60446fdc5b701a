"""The line-table decoders agree with CPython's own co_lines() for every
instruction of every code object in a set of standard-library modules."""
import ctypes
import sys
import types

import tpyshim
from tpyshim import pydll, check

import argparse, asyncio.base_events, email.message, json.decoder, threading, typing, unittest.case  # noqa

MODULES = [argparse, asyncio.base_events, email.message, json.decoder, threading, typing, unittest.case]


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def module_code(module):
    with open(module.__file__) as f:
        return compile(f.read(), module.__file__, "exec")


def encode_310(code):
    """A 3.10-format line table (byte delta, line delta; -128 = no line),
    written from co_lines() following the 3.10 format description."""
    out = bytearray()
    line = code.co_firstlineno
    for start, end, ln in code.co_lines():
        size = end - start
        if ln is None:
            delta, rest = -128, -128  # -128: "no line" for every chunk
        else:
            delta, rest = ln - line, 0
            line = ln
            while delta > 127 or delta < -127:  # -128 itself is the sentinel
                step = 127 if delta > 0 else -127
                out += bytes([0, step & 0xff])
                delta -= step
        first = True
        while size > 254 or first:
            chunk = min(size, 254)
            out += bytes([chunk, (delta if first else rest) & 0xff])
            size -= chunk
            first = False
        if size:
            out += bytes([size, rest & 0xff])
    return bytes(out)


checked = bad311 = bad310 = 0
examples = []
examples310 = []
for module in MODULES:
    for code in code_objects(module_code(module)):
        table = code.co_linetable
        buf = ctypes.create_string_buffer(table, len(table))
        t310 = encode_310(code)
        buf310 = ctypes.create_string_buffer(t310, len(t310))
        for start, end, line in code.co_lines():
            if line is None:
                continue
            for addr in range(start, end, 2):
                checked += 1
                if sys.version_info >= (3, 11):
                    got = pydll.tpy_line_311(buf, len(table), code.co_firstlineno, addr // 2)
                    if got != line:
                        bad311 += 1
                        examples.append((code.co_name, addr, got, line))
                got = pydll.tpy_line_310(buf310, len(t310), code.co_firstlineno, addr)
                if got != line:
                    bad310 += 1
                    examples310.append((code.co_name, addr, got, line))
print("%d instructions checked" % checked)
check("enough instructions checked", checked > 20000, True)
check("3.11+ location table decoder mismatches", (bad311, examples[:3]), (0, []))
check("3.10 line table decoder mismatches", (bad310, examples310[:3]), (0, []))
# Garbage never crashes and never reads past the end.
garbage = bytes(range(256)) * 4
for size in range(0, len(garbage), 37):
    pydll.tpy_line_311(ctypes.create_string_buffer(garbage[:size], size), size, 1, 1000)
    pydll.tpy_line_310(ctypes.create_string_buffer(garbage[:size], size), size, 1, 1000)
check("garbage tables survive", True, True)
tpyshim.finish()
