"""The Python suite's assertions: each check prints ok/FAIL and keeps going;
finish() ends the test with the failures counted (exit 1) or passes."""
import sys

failures = []


def check(what, got, want):
    if got != want:
        failures.append(what)
        print("FAIL %s\n  got  %r\n  want %r" % (what, got, want))
    else:
        print("ok   %s" % what)


def finish():
    if failures:
        print("%d check(s) failed: %s" % (len(failures), ", ".join(failures)))
        sys.exit(1)
    print("all checks passed")
